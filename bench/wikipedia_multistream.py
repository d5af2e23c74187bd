"""Where the CPU time of Wikipedia extraction goes: the main process against its workers.

    PYTHONPATH=. python bench/wikipedia_multistream.py [--dump ../shared/data/enwiki-sample-70pages.xml.bz2]
        [--copies 16 64] [--processes 2]

The real 70-page enwiki dump is repeated `--copies` times (each copy with new page ids and titles)
and written both as a multistream dump with its index (the parallel path) and as one bz2 stream
(the path without an index); each is extracted with `--processes` workers. For each run: wall
time, CPU seconds of the main process (getrusage RUSAGE_SELF) and of the workers (RUSAGE_CHILDREN:
the pool's processes, waited for when each pass ends), CPU seconds per MB of XML, and the main
process's share. The target for the multistream path: main <= 10% of the workers.
"""

import argparse
import bz2
import json
import re
import resource
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from bert.corpus.wikipedia import extract_wikipedia
from sample_world.wiki_xml import multistream

PAGE_TITLE_AND_ID = re.compile(r"(<page>\s*<title>)([^<]*)(</title>\s*<ns>\d+</ns>\s*<id>)(\d+)")


def repeated_xml(source: Path, copies: int) -> bytes:
    """The dump's pages `copies` times, each copy's with new ids and titles (distinct documents)."""
    xml = bz2.decompress(source.read_bytes()).decode("utf-8")
    first, last = xml.index("<page>"), xml.rindex("</page>") + len("</page>")
    head, body, tail = xml[:first], xml[first:last], xml[last:]

    def renamed(copy: int) -> str:
        return PAGE_TITLE_AND_ID.sub(
            lambda m: f"{m[1]}{m[2]} ({copy}){m[3]}{copy * 10_000_000 + int(m[4])}", body
        )

    return (head + "\n  ".join(renamed(copy) for copy in range(copies)) + tail).encode("utf-8")


def documents(folder: Path) -> list[dict]:
    """The table's rows in order: the two forms cut it into different part files."""
    return [row for part in sorted(folder.glob("*.parquet")) for row in pq.read_table(part).to_pylist()]


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure(dump: Path, processes: int, out: Path) -> dict:
    main, workers, wall = (
        cpu_seconds(resource.RUSAGE_SELF),
        cpu_seconds(resource.RUSAGE_CHILDREN),
        time.perf_counter(),
    )
    stats = extract_wikipedia(dump, out, "wikipedia", processes)
    wall = time.perf_counter() - wall
    main = cpu_seconds(resource.RUSAGE_SELF) - main
    workers = cpu_seconds(resource.RUSAGE_CHILDREN) - workers
    megabytes = stats.xml_bytes / 1e6
    return {
        "xml_megabytes": round(megabytes, 1),
        "documents": stats.documents,
        "wall_seconds": round(wall, 2),
        "main_cpu_seconds": round(main, 2),
        "workers_cpu_seconds": round(workers, 2),
        "cpu_seconds_per_megabyte": round((main + workers) / megabytes, 3),
        "main_share_of_workers": round(main / workers, 3) if workers else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, default=Path("../shared/data/enwiki-sample-70pages.xml.bz2"))
    parser.add_argument("--copies", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for copies in args.copies:
            xml = repeated_xml(args.dump, copies)
            dump, index = multistream(xml)
            (tmp / "multistream").mkdir()
            (tmp / "multistream/bench-pages-articles-multistream.xml.bz2").write_bytes(dump)
            (tmp / "multistream/bench-pages-articles-multistream-index.txt.bz2").write_bytes(index)
            (tmp / "single/").mkdir()
            (tmp / "single/bench-pages-articles.xml.bz2").write_bytes(bz2.compress(xml))
            for form in ("multistream", "single"):
                result = measure(tmp / form, args.processes, tmp / f"out-{form}")
                print(
                    json.dumps({"copies": copies, "form": form, "processes": args.processes, **result}),
                    flush=True,
                )
            same = documents(tmp / "out-multistream") == documents(tmp / "out-single")
            print(json.dumps({"copies": copies, "same_documents_both_forms": same}), flush=True)
            for folder in ("multistream", "single", "out-multistream", "out-single"):
                for path in (tmp / folder).iterdir():
                    path.unlink()
                (tmp / folder).rmdir()


if __name__ == "__main__":
    main()
