"""Stage download_weights: fetch Google's BERT (Hugging Face format) named by finetune.init into data/weights/.

With any other finetune.init (phase2, hf:<dir>, random) nothing is fetched: data/weights/ holds only
a README.txt saying so, which keeps the DVC output present and the stage instant.
"""

import contextlib
import logging
from pathlib import Path

from bert.corpus.download import SourceNotFound, download, publish, remove_staging, staging_dir
from bert.errors import UserError, run_main
from stages.params import load_params

OUT_DIR = Path("data/weights")
log = logging.getLogger("stages.download_weights")
REQUIRED = ("config.json", "vocab.txt")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the first the repository has
OPTIONAL = ("tokenizer_config.json",)


def main() -> None:
    params = load_params()
    init = params.finetune.init
    if init not in params.weights:
        readme = OUT_DIR.with_name(".weights-README.txt")
        readme.parent.mkdir(parents=True, exist_ok=True)
        readme.write_text(
            f"No pretrained weights are needed for finetune.init={init}.\n"
            f"Set finetune.init to one of {', '.join(params.weights)} to download Google's BERT here.\n",
            encoding="utf-8",
        )
        publish({"README.txt": readme}, OUT_DIR)
        log.info("finetune.init=%s needs no downloaded weights; wrote %s/README.txt", init, OUT_DIR)
        return
    base = params.weights[init].rstrip("/")
    staging = staging_dir(OUT_DIR, {"init": init, "base": base})
    fetched = [fetch(base, name, staging) for name in REQUIRED]
    fetched.append(fetch_first(base, WEIGHT_FILES, staging))
    for name in OPTIONAL:
        with contextlib.suppress(SourceNotFound):  # optional: older repositories lack it
            fetched.append(fetch(base, name, staging))
    publish({f"{init}/{path.name}": path for path in fetched}, OUT_DIR)
    remove_staging(staging)
    log.info("%s/%s: %s", OUT_DIR, init, ", ".join(path.name for path in fetched))


def fetch(base: str, name: str, staging: Path) -> Path:
    target = staging / name
    if not target.exists():  # finished in an earlier, interrupted run
        download(f"{base}/{name}", target)
    return target


def fetch_first(base: str, names: tuple[str, ...], staging: Path) -> Path:
    for name in names:
        try:
            return fetch(base, name, staging)
        except SourceNotFound:
            pass
    raise UserError(f"{base}: has none of {', '.join(names)}; check the URL in params.yaml `weights`")


if __name__ == "__main__":
    run_main(main)
