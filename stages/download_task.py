"""Stage download_task@<task>: fetch params.tasks.<task>.sources into data/tasks/<task>/.

Sources are the task's files, its folder, or the .zip GLUE publishes per task (unpacked here).
The stage finds each split's file by the name tasks.<task>.splits gives it (the published names
by default: train.tsv, dev.tsv, dev_matched.tsv, ...; SWAG's train.csv and val.csv; a re-split or
a private set names its own), keeps it under the published name, so the later stages read the same
paths whatever the source called them, and reads each through the task's reader
first, so a file of another task, a missing column or a bad label fails here, naming the file and
line, not hours later. Downloads resume as the corpora's do (bert.download).
"""

import argparse
import logging
from pathlib import Path

from bert.download.manifest import Manifest
from bert.download.staging import Staging, staged
from bert.errors import run_main
from bert.inputs import read_zip_members
from bert.source_tree import Rules
from bert.tasks.catalogue import task_named
from bert.tasks.data import find_split_files, read_split, with_source_files
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("download_task")
TASKS_DIR = layout.DATA / "tasks"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task of `tasks.run` in params.yaml, e.g. mrpc")
    published = task_named(parser.parse_args().task)
    params = load_params()
    settings = getattr(params.tasks, published.name)
    task = with_source_files(published, vars(settings.splits), f"tasks.{published.name}.splits")
    out_dir = TASKS_DIR / task.name
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    manifest = Manifest.read(layout.task_sources(task.name), f"tasks.{task.name}.sources", settings.sources)
    sources = {"sources": settings.sources, "checksums": settings.checksums}
    with staged(out_dir, sources, rules, manifest) as staging:
        files = staging.fetch_many(settings.sources, settings.checksums or None, into="downloads")
        for path in files:
            if path.suffix == ".zip":
                unpack(path, staging, task.splits.values())
        found = find_split_files(task, staging.folder)
        for split, path in found.items():
            examples = read_split(task, path, source=staging.origin(path))
            log.info("%s %s: %d examples (%s)", task.title, split, len(examples), staging.origin(path))
        staging.publish({published.splits[split]: path for split, path in found.items()})


def unpack(archive: Path, staging: Staging, names) -> None:
    """The task's files from a GLUE zip (CoLA.zip holds CoLA/train.tsv, ...), nothing else, each
    unpacked into the staging folder and named in messages as `<zip source>:<member>`."""
    source = staging.origin(archive)
    for member, data in read_zip_members(archive, lambda name: Path(name).name in names, source):
        target = staging.folder / "unpacked" / Path(member).parent.name / Path(member).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        staging.came_from(target, f"{source}:{member}")


if __name__ == "__main__":
    run_main(main)
