"""Corpus cleaning at growing size: documents/s per core, peak RSS, and recall / precision of
planted duplicate pairs against their exact Jaccard similarity.

    PYTHONPATH=. python bench/cleaning.py [--scales 1 4 16] [--scripts latin cjk mixed] [--workers 2] [--json OUT.json]

A scale-N corpus is two document tables ("wiki" and "books") of 500 x N random-word documents
(200 to 800 words from a 20,000-word vocabulary, so unrelated documents share no shingle), with
planted pairs: exact copies (whitespace and case changed), near copies at Jaccard 0.95, 0.9, 0.85
and 0.8 (the default threshold), and pairs well below it (0.6, 0.45, 0.3), within a table and
across the two. A copy is its original with m new words appended: of S shingles, Jaccard is
S / (S + m), and the exact figure of each pair is measured, not assumed. Recall: planted pairs at
or above the threshold whose later document was removed; precision: removed documents that are
the later document of a planted pair at or above it.

`--scripts` picks the documents' script: `latin` (the words above, the default), `cjk` (Chinese:
random characters of 3,000 common ideographs, a comma every 5 to 20, no spaces: each character
is a word) or `mixed` (Japanese-like: runs of ideographs and kana between runs of 1 to 3 of the
latin words, no spaces at the script changes). Their near copies change words in place, spread
through the text (as an edited copy of a Chinese page changes characters), rather than append.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bert.cleaning.dedup import clean_corpora  # noqa: E402
from bert.cleaning.settings import CleanSettings, NearSettings  # noqa: E402
from bert.cleaning.text import WORD, jaccard, normalise, text_ngrams, words  # noqa: E402
from bert.compute import Compute  # noqa: E402
from bert.corpus.documents import DocumentWriter  # noqa: E402

NEAR = (0.95, 0.9, 0.85, 0.8)
FAR = (0.6, 0.45, 0.3)
DEFAULTS = NearSettings(enabled=True, threshold=0.8, ngram=5, num_perm=128, bands=32)


SCRIPTS = ("latin", "cjk", "mixed")
IDEOGRAPHS = [chr(0x4E00 + n) for n in range(3_000)]
KANA = [chr(c) for c in (*range(0x3041, 0x3097), *range(0x30A1, 0x30FB))]


def _words(rng: random.Random, count: int) -> list[str]:
    return [f"w{rng.randrange(20_000)}" for _ in range(count)]


def _text(rng: random.Random, count: int, script: str) -> str:
    """A text of `count` words (bert.cleaning.text.words) in `script`."""
    if script == "latin":
        return " ".join(_words(rng, count))
    pieces, made = [], 0
    while made < count:
        if script == "cjk":
            run = min(rng.randrange(5, 21), count - made)
            pieces.append("".join(rng.choice(IDEOGRAPHS) for _ in range(run)) + "，")
        else:  # a run of ideographs and kana, then a run of latin words
            run = min(rng.randrange(2, 13), count - made)
            pieces.append("".join(rng.choice(IDEOGRAPHS if rng.random() < 0.6 else KANA) for _ in range(run)))
            latin = min(rng.randrange(1, 4), count - made - run)
            pieces.append(" ".join(_words(rng, latin)))
            run += latin
        made += run
    return "".join(pieces)


def _changed(rng: random.Random, text: str, changes: int) -> str:
    """`text` with `changes` of its words, spread evenly, each replaced by a new word of its kind
    (a character for a character of CJK, a latin word for a latin word)."""
    found = list(WORD.finditer(text))
    at = {int((i + 0.5) * len(found) / changes) for i in range(changes)}
    pieces, end = [], 0
    for number in sorted(at):
        match = found[number]
        new = (
            rng.choice(IDEOGRAPHS)
            if len(match.group()) == 1 and match.group() >= "\u3000"
            else _words(rng, 1)[0]
        )
        pieces += [text[end : match.start()], new]
        end = match.end()
    return "".join(pieces) + text[end:]


def planted_corpus(
    scale: int, seed: int, ngram: int = 5, script: str = "latin"
) -> tuple[list[list[str]], list[tuple]]:
    """Two corpora of texts and the planted pairs: (corpus, index) of the original, of the copy
    (always later in corpus order), the kind (exact | near | far) and the exact Jaccard."""
    rng = random.Random(seed)
    corpora = [[_text(rng, rng.randrange(200, 800), script) for _ in range(500 * scale)] for _ in range(2)]
    pairs = []
    plan = [("exact", 1.0)] * 4 + [("near", j) for j in NEAR] * 3 + [("far", j) for j in FAR] * 3
    for _ in range(scale):
        for kind, target in plan:
            source_corpus = rng.randrange(2)
            copy_corpus = rng.randrange(source_corpus, 2)  # the copy lies later: the original is kept
            original_index = rng.randrange(len(corpora[source_corpus]))
            original = corpora[source_corpus][original_index]
            if kind == "exact":
                copy = "  " + original.upper().replace(" ", " \n ") + "\n"
            elif script == "latin":  # S shingles and m new words appended: Jaccard S / (S + m)
                shingles = len(original.split()) - ngram + 1
                extra = max(1, round(shingles * (1 / target - 1)))
                copy = original + " " + " ".join(_words(rng, extra))
            else:  # k words changed, each breaking `ngram` shingles: (S - kn) / (S + kn)
                shingles = len(words(normalise(original, True))) - ngram + 1
                changes = max(1, round(shingles * (1 - target) / (ngram * (1 + target))))
                copy = _changed(rng, original, changes)
            corpora[copy_corpus].append(copy)
            measured = jaccard(text_ngrams(original, ngram, True, True), text_ngrams(copy, ngram, True, True))
            pairs.append(
                (
                    (source_corpus, original_index),
                    (copy_corpus, len(corpora[copy_corpus]) - 1),
                    kind,
                    measured,
                )
            )
    return corpora, pairs


def write_tables(root: Path, corpora: list[list[str]]) -> dict[str, Path]:
    folders = {}
    for name, texts in zip(("wiki", "books"), corpora):
        folders[name] = root / name
        folders[name].mkdir(parents=True)
        with DocumentWriter(folders[name], part_bytes=4 * 2**20) as writer:
            for index, text in enumerate(texts):
                writer.add(name, f"{name}-{index}", f"{name} {index}", text)
    return folders


def removed_documents(output: Path, folders: dict[str, Path]) -> set[tuple[int, int]]:
    """(corpus, index) of every document missing from the cleaned tables."""
    import pyarrow.parquet as pq

    removed = set()
    for corpus, name in enumerate(folders):
        before = [
            r
            for f in sorted(folders[name].glob("*.parquet"))
            for r in pq.read_table(f).column("doc_id").to_pylist()
        ]
        after = {
            r
            for f in sorted((output / name).glob("*.parquet"))
            for r in pq.read_table(f).column("doc_id").to_pylist()
        }
        removed |= {(corpus, index) for index, doc_id in enumerate(before) if doc_id not in after}
    return removed


def score(pairs: list[tuple], removed: set, threshold: float) -> dict:
    above = [p for p in pairs if p[3] >= threshold]
    below = [p for p in pairs if p[3] < 0.5]
    planted_later = {p[1] for p in above}
    return {
        "recall": sum(p[1] in removed for p in above) / max(len(above), 1),
        "precision": len(removed & planted_later) / max(len(removed), 1),
        "removed_below_0.5": sum(p[1] in removed for p in below),
        "exact_found": all(p[1] in removed for p in pairs if p[2] == "exact"),
        "pairs_above": len(above),
    }


def settings(near: NearSettings = DEFAULTS) -> CleanSettings:
    return CleanSettings(
        exact=True,
        near=near,
        lower_case=True,
        seed=12345,
        decontaminate="none",
        contamination_ngram=13,
        boilerplate_min_documents=0,
    )


def run(scale: int, workers: int, root: Path, script: str = "latin") -> dict:
    """Scale-N corpus written, then cleaned in a process of its own (so that its peak RSS and CPU
    are the cleaning's, not this generator's)."""
    corpora, pairs = planted_corpus(scale, seed=scale, script=script)
    folders = write_tables(root / "in", corpora)
    documents, mb = (
        sum(len(texts) for texts in corpora),
        sum(len(t) for texts in corpora for t in texts) / 1e6,
    )
    del corpora
    output = root / "out"
    output.mkdir()
    command = [sys.executable, __file__, "--clean", str(root), "--workers", str(workers)]
    used = json.loads(
        subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1]
    )
    cpu = used["main_cpu"] + used["workers_cpu"]
    return {
        "script": script,
        "scale": scale,
        "documents": documents,
        "mb": round(mb, 2),
        "seconds": round(used["seconds"], 2),
        "main_cpu_seconds": round(used["main_cpu"], 2),
        "workers_cpu_seconds": round(used["workers_cpu"], 2),
        "documents_per_core_second": round(documents / cpu, 1),
        "mb_per_core_second": round(mb / cpu, 2),
        "peak_rss_mb_main": round(used["main_rss"], 1),
        "peak_rss_mb_worker": round(used["workers_rss"], 1),
        **score(pairs, removed_documents(output, folders), DEFAULTS.threshold),
    }


def clean_only(root: Path, workers: int) -> None:
    """The cleaning alone, in this process; its rusage as the last line (JSON)."""
    folders = {name: root / "in" / name for name in ("wiki", "books")}
    start = time.perf_counter()
    clean_corpora(folders, root / "out", settings(), Compute("local", workers), None, [])
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({
        "seconds": time.perf_counter() - start,
        "main_cpu": own.ru_utime + own.ru_stime,
        "workers_cpu": children.ru_utime + children.ru_stime,
        "main_rss": own.ru_maxrss / 1024,
        "workers_rss": children.ru_maxrss / 1024,
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--scripts", nargs="+", choices=SCRIPTS, default=["latin"])
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", type=Path)
    parser.add_argument("--clean", type=Path, help=argparse.SUPPRESS)  # the child process of run()
    args = parser.parse_args()
    if args.clean:
        clean_only(args.clean, args.workers)
        return
    rows = []
    for script in args.scripts:
        for scale in args.scales:
            with tempfile.TemporaryDirectory() as root:
                rows.append(run(scale, args.workers, Path(root), script))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
