"""Stage download_squad@<version>: fetch the SQuAD train/dev of the version squad.run names into
data/squad/{train,dev}.json, two outputs beside the folder's committed README (the folder is there
without SQuAD too, as the eval_texts stage depends on it)."""

from pathlib import Path

from bert.download.manifest import Manifest
from bert.download.staging import staged
from bert.errors import UserError, run_main
from bert.source_tree import Rules
from bert.squad.dataset import dataset_version, examples_from_json, read_json
from stages.common import layout
from stages.common.params import load_params

OUT_DIR = layout.SQUAD_DIR


def main() -> None:
    params = load_params()
    version = params.squad.version
    files = params.squad.sources[version]
    sources = {"train.json": files.train, "dev.json": files.dev}
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    manifest = Manifest.read(layout.SQUAD_SOURCES, f"squad.sources.{version}", [files.train, files.dev])
    with staged(OUT_DIR, sources, rules, manifest) as staging:
        for name, source in sources.items():
            target = staging.fetch(source, name)
            try:
                check_version(target, source, version)
            except UserError:
                staging.discard(target)  # so the re-run fetches the fixed file, not this one again
                raise
        staging.publish_beside({name: staging.folder / name for name in sources})


def check_version(path: Path, source: str, version: str) -> None:
    """Catch a v1.1 file given for v2.0, or not SQuAD at all (wrong types, answers not in their
    context), before anything trains on it."""
    dataset = read_json(path, source)
    if not isinstance(dataset, dict):
        raise UserError(f"{source}: not a SQuAD JSON file (a JSON {type(dataset).__name__}, not an object)")
    # Files in the v1.1 format other than SQuAD's own often carry no `version`: their content decides.
    found = dataset.get("version") or dataset_version(dataset)
    if str(found).lstrip("v") != version.lstrip("v"):
        raise UserError(
            f"{source}: SQuAD version {found!r} in the file, but squad.run runs {version!r}; "
            f"point squad.sources.{version} at the {version} files"
        )
    if dataset.get("data") != []:  # an empty file is the fine-tuning stage's to refuse (no questions)
        examples_from_json(dataset, source)  # structure, types and answers: one line naming the question


if __name__ == "__main__":
    run_main(main)
