"""Stage download_squad: fetch SQuAD train/dev of params.squad.version into data/squad/{train,dev}.json."""

import json
from pathlib import Path

from bert.corpus.download import download_staged, publish, remove_staging, staging_dir
from bert.errors import UserError, run_main
from bert.squad.dataset import dataset_version
from stages import layout
from stages.params import load_params

OUT_DIR = layout.SQUAD_DIR


def main() -> None:
    params = load_params()
    version = params.squad.version
    files = params.squad.sources[version]
    sources = {"train.json": files.train, "dev.json": files.dev}
    staging = staging_dir(OUT_DIR, sources)
    for name, source in sources.items():
        target = download_staged(source, staging / name)
        try:
            check_version(target, source, version)
        except UserError:
            target.unlink()  # so the re-run fetches the fixed file, not this one again
            raise
    publish({name: staging / name for name in sources}, OUT_DIR)
    remove_staging(staging)


def check_version(path: Path, source: str, version: str) -> None:
    """Catch a v1.1 file given for v2.0 (or not SQuAD at all) before anything trains on it."""
    try:
        with open(path, encoding="utf-8") as file:
            dataset = json.load(file)
    except ValueError as error:
        raise UserError(f"{source}: not a SQuAD JSON file ({error})") from None
    if not isinstance(dataset, dict):
        raise UserError(f"{source}: not a SQuAD JSON file (a JSON {type(dataset).__name__}, not an object)")
    # Files in the v1.1 format other than SQuAD's own often carry no `version`: their content decides.
    found = dataset.get("version") or dataset_version(dataset)
    if str(found).lstrip("v") != version.lstrip("v"):
        raise UserError(
            f"{source}: SQuAD version {found!r} in the file, but squad.version is {version!r}; "
            f"point squad.sources.{version} at the {version} files"
        )


if __name__ == "__main__":
    run_main(main)
