"""Stage download_weights@<name>: the Hugging Face BERT folder `weights.<name>` -> data/weights/<name>/.

One stage per entry of `weights` in params.yaml (Google's released checkpoints, or any URL or local
folder in Hugging Face format). Only the entries finetune.init or pretrain.init name are fetched;
the others hold a README.txt saying so, which keeps their DVC output present and the stage
instant. Changing either back to an entry fetched before restores it from DVC's run cache.
"""

import argparse
import contextlib
import logging
from pathlib import Path

from bert.corpus.download import SourceNotFound, download_staged, publish, remove_staging, staging_dir
from bert.errors import UserError, run_main
from stages import layout
from stages.params import load_params

log = logging.getLogger("stages.download_weights")
REQUIRED = ("config.json", "vocab.txt")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the first the folder has
OPTIONAL = ("tokenizer_config.json",)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m stages.download_weights", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", help="a key of `weights` in params.yaml, e.g. google-base-uncased")
    name = parser.parse_args().name
    params = load_params()
    if name not in params.weights:
        raise UserError(f"params.yaml: no `weights.{name}`; weights: {', '.join(params.weights) or 'none'}")
    out_dir = layout.weights(name)
    if name not in (params.finetune.init, params.pretrain.init):
        readme = out_dir.with_name(f".{name}-README.txt")
        readme.parent.mkdir(parents=True, exist_ok=True)
        # (the demo's text, byte for byte, since pretrain.init arrived: the same DVC output)
        readme.write_text(
            f"Not fetched: finetune.init is {params.finetune.init}, not {name}.\n"
            f"dvc exp run -S finetune.init={name} fetches {params.weights[name]} here.\n",
            encoding="utf-8",
        )
        publish({"README.txt": readme}, out_dir)
        log.info(
            "%s: not needed (finetune.init=%s, pretrain.init=%s); wrote %s/README.txt",
            name, params.finetune.init, params.pretrain.init, out_dir,
        )  # fmt: skip
        return
    base = params.weights[name].rstrip("/")
    staging = staging_dir(out_dir, {"base": base})
    fetched = [fetch(base, file, staging) for file in REQUIRED]
    fetched.append(fetch_first(base, WEIGHT_FILES, staging, name))
    for file in OPTIONAL:
        with contextlib.suppress(SourceNotFound):  # optional: older repositories lack it
            fetched.append(fetch(base, file, staging))
    publish({path.name: path for path in fetched}, out_dir)
    remove_staging(staging)
    log.info("%s: %s", out_dir, ", ".join(path.name for path in fetched))


def fetch(base: str, file: str, staging: Path) -> Path:
    return download_staged(f"{base}/{file}", staging / file)


def fetch_first(base: str, files: tuple[str, ...], staging: Path, name: str) -> Path:
    for file in files:
        try:
            return fetch(base, file, staging)
        except SourceNotFound:
            pass
    raise UserError(f"{base}: has none of {', '.join(files)}; check weights.{name} in params.yaml")


if __name__ == "__main__":
    run_main(main)
