"""Stage shard@<corpus>: data/clean/<corpus>/ (the cleaned documents) -> data/shards/<corpus>/ (sentence shards)."""

import sys

from bert.atomic import write_json
from bert.corpus.shards import shard_corpus
from bert.errors import UserError, run_main
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    if len(sys.argv) != 2:
        raise UserError("usage: python -m stages.shard <corpus>   (e.g. wikipedia or bookcorpus)")
    corpus = sys.argv[1]
    params = load_params()
    if corpus not in params.corpora:
        raise UserError(f"unknown corpus {corpus!r}; params.yaml `corpora` has: {', '.join(params.corpora)}")
    metrics = shard_corpus(
        layout.clean(corpus),
        layout.shards(corpus),
        num_train_shards=params.shard.num_train_shards,
        num_test_shards=params.shard.num_test_shards,
        test_fraction=params.shard.test_fraction,
        min_sentences=params.shard.min_sentences,
        punkt_mode=params.shard.punkt,
        seed=params.seed,
        compute=params.compute,
    )
    write_json(layout.shard_metrics(corpus), metrics)


if __name__ == "__main__":
    run_main(main)
