"""Stage init_random: data/weights/random/, a freshly initialised model.size model over data/vocab
(BERT, or ModernBERT for its presets and config.json files).

    python -m stages.init_random

finetune.init: random fine-tunes from it: the baseline pretraining must beat; pretrain.phases'
first phase starts from it (phase1: random). The weights are drawn from params.seed and model.size.
A Hugging Face directory like any other start, with the vocabulary.
"""

import logging
from pathlib import Path

import torch

from bert.errors import UserError, run_main
from bert.model import family
from bert.text.tokenization import vocabulary_size
from stages.common import layout
from stages.common.params import load_params

OUT_DIR = layout.weights("random")


def main() -> None:
    params = load_params()
    vocab_file = layout.vocab_file()
    if not vocab_file.is_file():
        raise UserError(f"{vocab_file}: not found; run the vocab stage first (dvc repro vocab)")
    model = write_random_weights(OUT_DIR, vocab_file, params.model.size, params.seed, params.vocab.lower_case)
    logging.getLogger("init_random").info(
        "%s: %s, %.1fM parameters, seed %d",
        OUT_DIR,
        params.model.size,
        model.num_parameters() / 1e6,
        params.seed,
    )


def write_random_weights(
    out_dir: Path, vocab_file: Path, size: str, seed: int, lower_case: bool
) -> torch.nn.Module:
    """Fresh weights of `size` over `vocab_file`, drawn from `seed`, saved in `out_dir` (Hugging Face
    format, with the vocabulary)."""
    vocab_size = vocabulary_size(vocab_file)
    torch.manual_seed(seed)
    model = family.fresh(family.resolve_config(size, vocab_size), "pretraining")
    model.save_pretrained(out_dir, vocab_file=vocab_file, lower_case=lower_case)
    return model


if __name__ == "__main__":
    run_main(main)
