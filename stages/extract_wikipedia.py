"""Stage extract_wikipedia: data/raw/wikipedia/ (MediaWiki dumps) -> data/documents/wikipedia/."""

import logging

from bert.atomic import write_json
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import run_main
from stages.params import load_params

INPUT = "data/raw/wikipedia"
OUTPUT = "data/documents/wikipedia"
METRICS = "metrics/extract_wikipedia.json"


def main() -> None:
    params = load_params()
    stats = extract_wikipedia(INPUT, OUTPUT, params.extract.processes)
    metrics = stats.metrics()
    write_json(METRICS, metrics)
    logging.getLogger("extract_wikipedia").info(
        "%d pages -> %d documents in %.1fs: %.0f pages/s, %.2f MB/s of XML",
        stats.pages, stats.documents, stats.seconds, metrics["pages_per_second"], metrics["megabytes_per_second"],
    )  # fmt: skip


if __name__ == "__main__":
    run_main(main)
