"""Stage download_task@<task>: fetch params.tasks.<task>.sources into data/tasks/<task>/.

Sources are the task's files, its folder, or the .zip GLUE publishes per task (unpacked here).
The stage keeps the task's train and dev files under their published names (train.tsv, dev.tsv,
dev_matched.tsv, ...; SWAG's train.csv and val.csv), and reads each through the task's reader
first, so a file of another task, a missing column or a bad label fails here, naming the file and
line, not hours later. Downloads resume as the corpora's do (bert.corpus.download).
"""

import argparse
import logging
import zipfile
from pathlib import Path

from bert.corpus.download import download_many, file_name, publish, remove_staging, staging_dir
from bert.errors import UserError, run_main
from bert.tasks.data import find_split_files, read_split, task_named
from stages import layout
from stages.params import load_params

log = logging.getLogger("download_task")
TASKS_DIR = layout.DATA / "tasks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task of `tasks.run` in params.yaml, e.g. mrpc")
    task = task_named(parser.parse_args().task)
    settings = getattr(load_params().tasks, task.name)
    out_dir = TASKS_DIR / task.name
    staging = staging_dir(out_dir, {"sources": settings.sources, "checksums": settings.checksums})
    files = download_many(settings.sources, staging / "downloads", settings.checksums or None)
    origins = {path: source_of(path, settings.sources) for path in files}  # for the error lines
    for path in files:
        if path.suffix == ".zip":
            for member, unpacked in unpack(path, staging / "unpacked", task.splits.values()):
                origins[unpacked] = f"{origins[path]}:{member}"
    found = find_split_files(task, staging)
    for split, path in found.items():
        try:
            examples = read_split(task, path)
        except UserError as error:  # name the file the user gave, not its copy in the staging folder
            raise UserError(str(error).replace(str(path), origins.get(path, str(path)), 1)) from None
        log.info("%s %s: %d examples (%s)", task.title, split, len(examples), origins.get(path, path))
    publish({task.splits[split]: path for split, path in found.items()}, out_dir)
    remove_staging(staging)


def source_of(path: Path, sources: list[str]) -> str:
    """The source a downloaded file came from: the file itself, or a file of a source folder."""
    for source in sources:
        if file_name(source) == path.name:
            return source
        folder = Path(source.removeprefix("file://"))
        if "://" not in source.removeprefix("file://") and (folder / path.name).is_file():
            return str(folder / path.name)
    return str(path)


def unpack(archive: Path, into: Path, names) -> list[tuple[str, Path]]:
    """The task's files from a GLUE zip (CoLA.zip holds CoLA/train.tsv, ...), nothing else:
    (member name, unpacked path) pairs."""
    unpacked = []
    try:
        with zipfile.ZipFile(archive) as zipped:
            for member in zipped.infolist():
                name = Path(member.filename).name
                if name in names and not member.is_dir():
                    target = into / Path(member.filename).parent.name / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zipped.read(member))
                    unpacked.append((member.filename, target))
    except zipfile.BadZipFile as error:
        raise UserError(
            f"{archive}: not a valid zip file ({error}); delete it and run the stage again"
        ) from None
    return unpacked


if __name__ == "__main__":
    run_main(main)
