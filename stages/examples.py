"""Stage `examples@<phase>`: data/examples/<phase>/part_NNNNN.hdf5 + manifest.json from the train
sentence shards of every corpus, mixed as params.mixing says."""

import argparse
import logging

from bert.corpus.sentence_shards import train_shards
from bert.errors import run_main
from bert.pretraining.mixing import create_examples
from stages.common import layout
from stages.common.params import load_params


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.examples")
    parser.add_argument("phase", choices=layout.PHASES)
    phase = parser.parse_args().phase
    params = load_params()
    config = getattr(
        params.examples, phase
    )  # bert.pretraining.instances.ExampleConfig, as params.yaml writes it
    manifest = create_examples(
        train_shards(layout.shards(), list(params.corpora)),
        layout.examples(phase),
        layout.vocab_file(),
        params.vocab.lower_case,
        config,
        params.mixing.mode,
        params.mixing.weights,
        params.mixing.num_output_shards,
        params.seed,
        params.compute,
    )
    # An MLM-only run (examples.next_sentence: false) has no next-sentence pairs to count.
    random_next = (
        f", {100 * manifest['random_next_fraction']:.1f}% random next" if config.next_sentence else ""
    )
    logging.getLogger("examples").info(
        "%s: %d instances in %d shards, %d tokens%s (%s mixing)",
        layout.examples(phase),
        manifest["instances"],
        len(manifest["shards"]),
        manifest["tokens"],
        random_next,
        params.mixing.mode,
    )


if __name__ == "__main__":
    run_main(main)
