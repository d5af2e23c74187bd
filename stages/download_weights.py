"""Stage download_weights@<name>: the Hugging Face BERT or ModernBERT folder `weights.<name>` -> data/weights/<name>/.

One stage per entry of `weights` in params.yaml (Google's released checkpoints, or any URL or local
folder in Hugging Face format). Only the entries finetune.init or pretrain.phases start from are fetched;
the others hold a README.txt saying so, which keeps their DVC output present and the stage
instant. Every file is checked before the folder is published: config.json, the tensors' names and
shapes against it, the vocabulary, and that none is an HTML page served in its place. Changing
either init back to an entry fetched before restores it from DVC's run cache.
"""

import argparse
import contextlib
import logging
from pathlib import Path

from bert.download.manifest import Manifest
from bert.download.staging import Staging, publish, staged
from bert.download.transport import SourceNotFound
from bert.errors import UserError, run_main
from bert.source_tree import Rules
from bert.text.tokenization import load_tokenizer_from_dir
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("stages.download_weights")
REQUIRED = ("config.json",)
# The first the folder has: BERT's WordPiece vocab.txt, else a tokenizer.json (ModernBERT's BPE).
VOCAB_FILES = ("vocab.txt", "tokenizer.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # the first the folder has
OPTIONAL = ("tokenizer_config.json",)
FILES = (
    *REQUIRED,
    *VOCAB_FILES,
    *WEIGHT_FILES,
    *OPTIONAL,
)  # what a weights folder holds: an entry naming one meant the folder


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
    if name not in (params.finetune.init, params.pretrain_start):
        readme = out_dir.with_name(f".{name}-README.txt")
        readme.parent.mkdir(parents=True, exist_ok=True)
        # (the demo's text, byte for byte, since pretraining could start from weights: the same DVC output)
        readme.write_text(
            f"Not fetched: finetune.init is {params.finetune.init}, not {name}.\n"
            f"dvc exp run -S finetune.init={name} fetches {params.weights[name]} here.\n",
            encoding="utf-8",
        )
        publish({"README.txt": readme}, out_dir)
        log.info(
            "%s: not needed (finetune.init=%s, pretraining starts from %s); wrote %s/README.txt",
            name, params.finetune.init, params.pretrain_start, out_dir,
        )  # fmt: skip
        return
    base = params.weights[name].rstrip("/")
    rules = Rules(params.follow_links, layout.OUTPUT_ROOTS, bundled=(layout.SAMPLE,))
    manifest = Manifest.read(layout.weights_sources(name), f"weights.{name}", [params.weights[name]])
    try:  # every line names the param besides the files: the weights are fetched file by file
        fetched = fetch_weights(base, out_dir, rules, manifest)
    except UserError as error:
        raise type(error)(f"weights.{name}: {error}") from None
    log.info("%s: %s", out_dir, ", ".join(path.name for path in fetched))


def fetch_weights(base: str, out_dir: Path, rules: Rules, manifest: Manifest) -> list[Path]:
    """The folder `base` (a URL or local folder in Hugging Face format) checked and published as
    `out_dir` (checked against the `sources` stage's `manifest` of it); the files fetched."""
    with staged(out_dir, {"base": base}, rules, manifest) as staging:
        staging.came_from(staging.folder, base)  # the folder's checks name the weights as written
        tree = staging.walk(base)  # a local folder is checked whole, as the `sources` stage hashed it whole
        if (tree is not None and not tree.is_folder) or base.rsplit("/", 1)[-1] in FILES:
            raise UserError(
                f"{base} is a file, not the folder of the weights; name the folder that holds "
                f"{', '.join(REQUIRED)}, {' or '.join(VOCAB_FILES)} and {' or '.join(WEIGHT_FILES)}"
            )
        fetched = [fetch(base, file, staging) for file in REQUIRED]
        fetched.append(fetch_first(base, VOCAB_FILES, staging))
        fetched.append(fetch_first(base, WEIGHT_FILES, staging))
        for file in OPTIONAL:
            with contextlib.suppress(SourceNotFound):  # optional: older repositories lack it
                fetched.append(fetch(base, file, staging))
        check_folder(staging.folder)  # publish nothing that would fail at fine-tuning
        staging.publish({path.name: path for path in fetched})
    return fetched


def check_folder(folder: Path) -> None:
    """config.json valid (BERT's or ModernBERT's, by its model_type), every encoder tensor there with
    the shape it gives, a vocabulary (vocab.txt or tokenizer.json) that fits the embeddings
    (messages name the URL: the staging context translates the paths)."""
    # Here, not at the top: torch takes 2 s to import, and most of these stages (every entry that
    # neither init names) only write their README.
    from bert.model.family import check_pretrained

    config = check_pretrained(folder)
    tokenizer, _ = load_tokenizer_from_dir(folder)
    if tokenizer.get_vocab_size() > config.vocab_size:
        raise UserError(
            f"{layout.tokenizer_file(folder)}: {tokenizer.get_vocab_size()} tokens, more than config.json's vocab_size "
            f"{config.vocab_size}; the vocabulary and the weights do not belong together"
        )


def fetch(base: str, file: str, staging: Staging) -> Path:
    return staging.fetch(f"{base}/{file}", file)


def fetch_first(base: str, files: tuple[str, ...], staging: Staging) -> Path:
    for file in files:
        try:
            return fetch(base, file, staging)
        except SourceNotFound:
            pass
    raise UserError(f"{base}: has none of {', '.join(files)}; check the entry in params.yaml")


if __name__ == "__main__":
    run_main(main)
