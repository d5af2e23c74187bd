"""Benchmark of pretraining-instance creation: instances/s, tokens/s, MB of text/s and peak RSS,
with 1 worker and with all cores, on 1x and 4x the input; optionally against the pure-Python
reference (NVIDIA's create_pretraining_data.py, a copy of Google's) on the same text.

    python bench/pretraining_data.py --vocab VOCAB.txt --wikipedia enwiki-sample.xml.bz2 \
        [--reference-dir DIR_WITH_NVIDIA_create_pretraining_data.py_AND_tokenization.py]

The text is real Wikipedia prose pulled out of a MediaWiki XML dump with a crude regex, repeated
until it reaches --megabytes, in files of --file-megabytes (one task per file). Params: seq 128,
20 predictions, masked_lm_prob 0.15, dupe 5, short_seq_prob 0.1, as in the issue's reference run.
"""

import argparse
import bz2
import html
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wikipedia_documents(path: Path) -> list[list[str]]:
    with bz2.open(path, "rt", encoding="utf-8") as file:
        xml = file.read()
    documents = []
    for text in re.findall(r"<text[^>]*>(.*?)</text>", xml, flags=re.S):
        text = html.unescape(text)
        for _ in range(3):
            text = re.sub(r"\{\{[^{}]*\}\}", " ", text)
        text = re.sub(r"<ref[^>]*/>|<ref.*?</ref>|<[^>]+>", " ", text, flags=re.S)
        text = re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", text)
        text = re.sub(r"'{2,}|={2,}|^[|!*#:;{].*$", " ", text, flags=re.M)
        sentences = []
        for paragraph in text.split("\n"):
            paragraph = " ".join(paragraph.split())
            if len(paragraph) >= 40:
                sentences += [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", paragraph) if len(s) > 3]
        # long articles become several documents of 30 sentences, closer to a real corpus's mix
        documents += [
            sentences[i : i + 30] for i in range(0, len(sentences), 30) if len(sentences[i : i + 30]) >= 2
        ]
    return documents


def write_inputs(documents, folder: Path, megabytes: float, file_megabytes: float) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    blocks = ["\n".join(document) + "\n\n" for document in documents]
    files, written, index = [], 0, 0
    while written < megabytes * 1e6:
        path = folder / f"part_{len(files):03d}.txt"
        size = 0
        with open(path, "w", encoding="utf-8") as file:
            while size < file_megabytes * 1e6 and written + size < megabytes * 1e6:
                file.write(blocks[index % len(blocks)])
                size += len(blocks[index % len(blocks)].encode("utf-8"))
                index += 1
        written += size
        files.append(path)
    return files


def _cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its finished worker processes: on a shared
    machine it varies far less than wall time."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(inputs: list[str], vocab: str, output: str, workers: int) -> dict:
    """Run in a fresh process (see main) so that peak RSS belongs to this measurement alone."""
    sys.path.insert(0, str(REPO))
    from bert.pretraining.examples import ExampleConfig
    from bert.pretraining.instances import create_from_files

    config = ExampleConfig(
        max_seq_length=128, max_predictions_per_seq=20, masked_lm_prob=0.15, short_seq_prob=0.1, dupe_factor=5
    )
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    stats = create_from_files(inputs, output, vocab, True, config, seed=12345, num_workers=workers)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_seconds": _cpu_seconds() - cpu_start,
        "instances": stats.instances,
        "tokens": stats.tokens,
        "text_mb": stats.text_bytes / 1e6,
        "peak_rss_mb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_rss_mb_worker": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "output_mb": os.path.getsize(output) / 1e6,
    }


def run_measurement(inputs, vocab, output, workers) -> dict:
    command = [
        sys.executable,
        __file__,
        "--measure",
        json.dumps([list(map(str, inputs)), str(vocab), str(output), workers]),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_reference(reference_dir: Path, text: Path, vocab: str, scratch: Path) -> dict:
    """NVIDIA's create_pretraining_data.py on one text file, timed; its cached_path helper (which
    needs boto3) is replaced by a stub, nothing else is changed."""
    work = scratch / "reference"
    work.mkdir(exist_ok=True)
    for name in ("create_pretraining_data.py", "tokenization.py"):
        shutil.copy(reference_dir / name, work / name)
    (work / "file_utils.py").write_text("def cached_path(path, cache_dir=None):\n    return path\n")
    output = scratch / "reference.hdf5"
    script = (
        "import resource, runpy, sys, time; start, cpu = time.perf_counter(), time.process_time(); "
        "sys.argv = ['create_pretraining_data.py'] + sys.argv[1:]; "
        "runpy.run_path('create_pretraining_data.py', run_name='__main__'); "
        "print('BENCH', time.perf_counter() - start, time.process_time() - cpu, "
        "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    args = ["--vocab_file", vocab, "--input_file", str(text), "--output_file", str(output), "--max_seq_length", "128",
            "--max_predictions_per_seq", "20", "--masked_lm_prob", "0.15", "--dupe_factor", "5",
            "--short_seq_prob", "0.1", "--do_lower_case", "--random_seed", "12345"]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=work, capture_output=True, text=True, check=True
    )
    seconds, cpu_seconds, rss = map(float, done.stdout.strip().splitlines()[-1].split()[1:])
    import h5py

    with h5py.File(output) as file:
        instances = len(file["input_ids"])
        tokens = int(file["input_mask"][:].sum())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "instances": instances,
        "tokens": tokens,
        "text_mb": text.stat().st_size / 1e6,
        "peak_rss_mb_main": rss,
    }


def describe(name: str, result: dict, cores: int) -> str:
    rate = result["instances"] / result["seconds"]
    rss = max(result.get("peak_rss_mb_main", 0), result.get("peak_rss_mb_worker", 0))
    return (
        f"{name:<34} {result['text_mb']:6.1f} MB {result['instances']:>8} inst {result['seconds']:7.2f} s "
        f"{rate:>9,.0f} inst/s ({rate / cores:>8,.0f}/core) "
        f"{result['instances'] / result['cpu_seconds']:>9,.0f} inst/CPU-s "
        f"{result['tokens'] / result['seconds'] / 1e6:6.2f} Mtok/s "
        f"{result['text_mb'] / result['seconds']:6.2f} MB/s  peak RSS {rss:6.0f} MB"
    )


def compare(name: str, reference: dict, ours: dict) -> list[str]:
    def ratio(key: str) -> float:
        return (ours["instances"] / ours[key]) / (reference["instances"] / reference[key])

    return [
        describe(f"reference (NVIDIA), {name}", reference, 1),
        describe(f"ours, {name}, 1 worker", ours, 1),
        f"speed-up per core on {name}: {ratio('cpu_seconds'):.1f}x by CPU time, {ratio('seconds'):.1f}x by wall time",
    ]


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        print(json.dumps(measure(*json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vocab", required=True)
    parser.add_argument(
        "--wikipedia", required=True, help="a MediaWiki XML dump (.xml.bz2), e.g. the 70-page sample"
    )
    parser.add_argument(
        "--megabytes", type=float, default=8.0, help="text for the 1x run (4x is 4 times this)"
    )
    parser.add_argument(
        "--file-megabytes", type=float, default=2.0, help="size of each input file (one task each)"
    )
    parser.add_argument(
        "--reference-dir", type=Path, help="folder with NVIDIA's create_pretraining_data.py + tokenization.py"
    )
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    documents = wikipedia_documents(Path(args.wikipedia))
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        small = write_inputs(documents, scratch / "1x", args.megabytes, args.file_megabytes)
        large = write_inputs(documents, scratch / "4x", 4 * args.megabytes, args.file_megabytes)
        lines = [f"{cores} cores; seq 128, 20 predictions, dupe 5; files of {args.file_megabytes} MB"]
        results = {}
        for name, inputs, workers in (("1x, 1 worker", small, 1), (f"1x, {cores} workers", small, cores),
                                      ("4x, 1 worker", large, 1), (f"4x, {cores} workers", large, cores)):  # fmt: skip
            results[name] = run_measurement(inputs, args.vocab, scratch / "out.hdf5", workers)
            lines.append(describe(f"ours {name}", results[name], 1 if workers == 1 else cores))
        if args.reference_dir:
            # On one file (the reference takes one): the 1x text, where the repeated text flatters
            # the word cache (every chunk is known after the first copy), and the documents once,
            # every chunk new, in a file so small that start-up costs weigh. Real text lies between.
            whole = scratch / "whole_1x.txt"
            whole.write_bytes(b"".join(path.read_bytes() for path in small))
            once = scratch / "once.txt"
            once.write_text("".join("\n".join(document) + "\n\n" for document in documents), encoding="utf-8")
            for name, text in (("the 1x text", whole), ("the text once (no repeats)", once)):
                reference = run_reference(args.reference_dir, text, args.vocab, scratch)
                ours = run_measurement([text], args.vocab, scratch / "same.hdf5", 1)
                lines += compare(name, reference, ours)
        print("\n".join(lines))


if __name__ == "__main__":
    main()
