"""Throughput of the corpus stages on this machine.

    PYTHONPATH=. python bench/corpus_throughput.py [--dump PATH] [--megabytes 50]

Extraction (pages/s, MB of XML/s) on the given dump and on a larger synthetic dump made by
repeating its pages under new ids, with 1 and 2 processes; then sentence sharding (sentences/s)
of the larger dump's documents with 1 and 2 workers.
"""

import argparse
import bz2
import json
import re
import tempfile
import time
from pathlib import Path

from bert.corpus.shards import shard_corpus
from bert.corpus.wikipedia import extract_wikipedia


def repeat_dump(source: Path, target: Path, megabytes: float) -> None:
    opener = bz2.open if source.suffix == ".bz2" else open
    with opener(source, "rt", encoding="utf-8") as file:
        xml = file.read()
    head, _, rest = xml.partition("<page>")
    body = "<page>" + rest[: rest.rindex("</page>") + len("</page>")]
    copies = max(1, int(megabytes * 1e6 / len(body.encode("utf-8"))))
    with open(target, "w", encoding="utf-8") as out:
        out.write(head)
        for copy in range(copies):
            # New page ids (the first <id> of every page) so every copy is a distinct document.
            out.write(
                re.sub(
                    r"(<page>\s*<title>[^<]*</title>\s*<ns>\d+</ns>\s*<id>)(\d+)",
                    lambda m, copy=copy: f"{m.group(1)}{copy}{m.group(2)}",
                    body,
                )
            )
        out.write("\n</mediawiki>\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, default=Path("/work/shared/data/enwiki-sample-70pages.xml.bz2"))
    parser.add_argument("--megabytes", type=float, default=50)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big = tmp / "big.xml"
        repeat_dump(args.dump, big, args.megabytes)
        for name, dump in (
            (args.dump.name, args.dump),
            (f"synthetic {big.stat().st_size / 1e6:.0f} MB .xml", big),
        ):
            for processes in (1, 2):
                stats = extract_wikipedia(dump, tmp / f"docs-{processes}", "wikipedia", processes)
                m = stats.metrics()
                results[f"extract {name}, {processes} process(es)"] = {
                    k: m[k]
                    for k in ("pages", "documents", "seconds", "pages_per_second", "megabytes_per_second")
                }
        for workers in (1, 2):
            start = time.perf_counter()
            m = shard_corpus(
                tmp / "docs-2",
                tmp / f"shards-{workers}",
                num_train_shards=4,
                num_test_shards=1,
                test_fraction=0.05,
                min_sentences=2,
                punkt_mode="auto",
                seed=1,
                compute=workers,
            )
            results[f"shard synthetic, {workers} worker(s)"] = {
                k: m[k]
                for k in (
                    "documents",
                    "sentences",
                    "seconds",
                    "punkt_training_seconds",
                    "sentences_per_second",
                )
            }
            results[f"shard synthetic, {workers} worker(s)"]["wall_seconds_incl_punkt_training"] = round(
                time.perf_counter() - start, 2
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
