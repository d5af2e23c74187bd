"""Stage init_random: data/weights/random/, a freshly initialised model.size BERT over data/vocab.

    python -m stages.init_random

finetune.init: random fine-tunes from it: the baseline pretraining must beat; pretrain.phases'
first phase starts from it (phase1: random). The weights are drawn from params.seed and model.size.
A Hugging Face directory like any other start, with the vocabulary.
"""

import logging

import torch

from bert.errors import UserError, run_main
from bert.model.config import BertConfig
from bert.model.network import BertForPreTraining
from stages import layout
from stages.params import load_params

VOCAB = layout.VOCAB
OUT_DIR = layout.weights("random")


def main() -> None:
    params = load_params()
    if not VOCAB.is_file():
        raise UserError(f"{VOCAB}: not found; run the vocab stage first (dvc repro vocab)")
    with open(VOCAB, encoding="utf-8") as file:
        vocab_size = sum(1 for _ in file)
    torch.manual_seed(params.seed)
    model = BertForPreTraining(BertConfig.resolve(params.model.size, vocab_size))
    model.save_pretrained(OUT_DIR, vocab_file=VOCAB, lower_case=params.vocab.lower_case)
    logging.getLogger("init_random").info(
        "%s: %s, %.1fM parameters, seed %d",
        OUT_DIR,
        params.model.size,
        model.num_parameters() / 1e6,
        params.seed,
    )


if __name__ == "__main__":
    run_main(main)
