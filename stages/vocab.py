"""Stage `vocab`: data/vocab/vocab.txt + tokenizer_config.json, trained on the train shards,
downloaded (Google's) or copied, as params.vocab.source says."""

import logging
from functools import partial

from bert.corpus.sentence_shards import iter_sentences, train_shards
from bert.errors import run_main
from bert.vocab import prepare_vocab
from stages import layout
from stages.params import load_params


def main() -> None:
    params = load_params()
    vocab = params.vocab
    sentences = None
    if vocab.source == "train":
        files = [
            path for paths in train_shards(layout.shards(), list(params.corpora)).values() for path in paths
        ]
        sentences = partial(iter_sentences, files)
    path = prepare_vocab(
        vocab.source,
        layout.VOCAB_DIR,
        vocab.lower_case,
        sentences=sentences,
        vocab_size=vocab.vocab_size,
        min_frequency=vocab.min_frequency,
        url=vocab.url,
        checksum=vocab.checksum,
    )
    with open(path, encoding="utf-8") as file:
        size = sum(1 for _ in file)
    logging.getLogger("vocab").info(
        "%s: %d tokens (source: %s, lower_case: %s)", path, size, vocab.source, vocab.lower_case
    )


if __name__ == "__main__":
    run_main(main)
