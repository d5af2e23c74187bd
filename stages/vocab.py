"""Stage `vocab`: data/vocab/vocab.txt (WordPiece) or tokenizer.json (vocab.kind: bpe, or a
tokenizer.json source) + tokenizer_config.json, trained on the train shards,
downloaded (Google's), copied, or (vocab.source: weights) the tokenizer of the released weights
pretraining starts from (pretrain.phases), fetched from `weights.<name>` itself: the vocabulary comes before the
examples, and download_weights@<name> (which pretraining reads) need not run first."""

import logging
import tempfile
from functools import partial

from bert.corpus.sentence_shards import iter_sentences, train_shards
from bert.errors import UserError, run_main
from bert.text.tokenization import vocabulary_size
from bert.text.vocab import prepare_vocab, released_lower_case
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    params = load_params()
    vocab = params.vocab
    sentences = None
    if vocab.source == "train":
        files = [
            path for paths in train_shards(layout.shards(), list(params.corpora)).values() for path in paths
        ]
        sentences = partial(iter_sentences, files)
    url = vocab.url
    if vocab.source == "weights":  # params.py: pretraining then starts from a key of weights
        url = params.weights[params.pretrain_start]
        check_casing(url, params.pretrain_start, vocab.lower_case)
    path = prepare_vocab(
        vocab.source,
        layout.VOCAB_DIR,
        vocab.lower_case,
        kind=vocab.kind,
        sentences=sentences,
        vocab_size=vocab.vocab_size,
        min_frequency=vocab.min_frequency,
        url=url,
        checksum=vocab.checksum,
    )
    size = vocabulary_size(path)
    logging.getLogger("vocab").info(
        "%s: %d tokens (source: %s, kind: %s, lower_case: %s)",
        path,
        size,
        vocab.source,
        vocab.kind,
        vocab.lower_case,
    )


def check_casing(folder: str, name: str, lower_case: bool) -> None:
    """The released vocabulary is used with the casing it was made with: vocab.lower_case (which
    every later stage reads) must say what the folder's tokenizer_config.json says."""
    with tempfile.TemporaryDirectory() as scratch:
        released = released_lower_case(folder, scratch)
    if released is not None and released != lower_case:
        raise UserError(
            f"params.yaml: vocab.lower_case is {str(lower_case).lower()} but weights.{name} (where pretrain.phases starts) is "
            f"{'uncased' if released else 'cased'} (its tokenizer_config.json: do_lower_case "
            f"{str(released).lower()}); set vocab.lower_case: {str(released).lower()}"
        )


if __name__ == "__main__":
    run_main(main)
