"""Exact and near-duplicate removal across every corpus of a run, on the task engine.

Passes (the driver handles numbers and duplicate candidates only, never the corpus):
0. Boilerplate, when `boilerplate_min_documents` is set: each document's distinct line keys are
   spilled by key to partition files with the document's text digest, a task per partition counts
   the distinct texts holding each line (a document present twice counts once: its lines are not
   boilerplate, and exact deduplication keeps one copy), and lines in at least that many are
   removed from every document before anything below (and in the output). A document left with
   no text is removed, counted as emptied.
1. Sign, on the workers, a task per run of TASK_DOCUMENTS rows (bert.cleaning.tables): each
   document's normalised text digest (exact duplicates), its word-shingle set (sorted 64-bit
   hashes, spilled to the task's file for verification) and its MinHash signature (rensa's
   R-MinHash, `num_perm` values), cut into `bands` bands of num_perm / bands rows. Each band's rows
   and each digest become a 64-bit bucket key, written with the document's ordinal to one of
   `partitions` spill files chosen by the key, so a bucket lies whole in one partition. Under
   decontamination the same pass drops documents that share an n-gram with an evaluation set
   (bert.cleaning.contamination); they go to no bucket.
2. Bucket, on the workers, a task per partition: sort its entries by (key, ordinal); documents
   sharing a digest are exact pairs, documents sharing a band are candidate pairs (every pair of
   a bucket up to MAX_BUCKET_PAIRS members; past that each member with the first and the next).
3. Verify, on the workers, a task per signing task that holds the first document of candidate
   pairs: the exact Jaccard similarity of the two shingle sets; pairs at or above `threshold`
   are near duplicates.
4. Cluster, in the driver: union-find over exact and verified pairs (their documents only). The
   kept document of a cluster is the one with the smallest ordinal: the first corpus in params'
   order, then the first in its table. Every other member is removed, counted as an exact
   duplicate when its text equals that of an earlier member, else as a near duplicate.
5. Write, on the workers, a task per part file: the part without its removed rows, same name.
Nothing depends on the number of workers or the engine: tasks, partitions and the kept choice
follow the input alone, so the output is byte-identical on every scheduler.

LSH's trade-off: a pair of Jaccard similarity s shares at least one of b bands of r rows with
probability 1 - (1 - s^r)^b; docs/cleaning.md tabulates it for the defaults.
"""

import functools
import heapq
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import rensa
from tqdm import tqdm

from bert.atomic import task_file
from bert.cleaning import contamination
from bert.cleaning.settings import CleanSettings
from bert.cleaning.tables import Chunk, list_chunks, write_kept
from bert.cleaning.text import (
    jaccard,
    line_keys,
    ngram_hashes,
    normalise,
    strip_lines,
    text_digest,
    word_hashes,
    words,
)
from bert.compute import Compute
from bert.corpus.documents import read_rows
from bert.errors import UserError
from bert.parallel import ComputePool

ENTRIES_PER_PARTITION = 4_000_000  # bucket entries of one partition task (its memory: ~16 bytes each)
MAX_BUCKET_PAIRS = 32  # a bucket of more members gives each member two pairs, not all
SHINGLES_SCHEMA = pa.schema([("ordinal", pa.int64()), ("shingles", pa.list_(pa.uint64()))])
ENTRY = np.dtype([("key", "<u8"), ("ordinal", "<i8"), ("kind", "u1")])  # kind: 0 exact, 1 band
LINE = np.dtype([("key", "<u8"), ("text", "<u8")])  # a line's key, a text holding it (its digest)
SAMPLE_PAIRS = 20  # removed pairs shown in the human-readable sample


@dataclass
class CleanResult:
    metrics: dict
    samples: list[str]  # the human-readable sample of removed pairs, lines


def minhash_signatures(shingles: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """[documents, num_perm] uint32 R-MinHash signatures (rensa) of the documents whose shingle
    hashes are shingles[offsets[i]:offsets[i + 1]].

    rensa computes on a Rayon thread pool unless that pool has one thread; a process holding such
    a pool that forks (the local engine's workers, a later stage's pool) gives children that wait
    forever on threads they do not have. The engine already runs one process per core, so the pool
    is pinned to one thread, before its first use (Rayon reads RAYON_NUM_THREADS then), and the
    variable is put back for everything else in the process."""
    global _rayon_pinned
    if not _rayon_pinned:
        before = os.environ.get("RAYON_NUM_THREADS")
        os.environ["RAYON_NUM_THREADS"] = "1"
    try:
        matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
            shingles, offsets, num_perm=num_perm, seed=seed
        )
    finally:
        if not _rayon_pinned:
            _rayon_pinned = True
            if before is None:
                del os.environ["RAYON_NUM_THREADS"]
            else:
                os.environ["RAYON_NUM_THREADS"] = before
    return np.array(matrix.to_rows(), np.uint32).reshape(-1, num_perm)


_rayon_pinned = False  # rensa's Rayon pool has been made, with one thread (minhash_signatures)


def band_keys(signatures: np.ndarray, bands: int) -> np.ndarray:
    """[documents, bands] 64-bit keys, one per band of rows of the signatures; the band's number is
    part of the key, so equal rows in different bands are different buckets."""
    rows = signatures.shape[1] // bands
    with np.errstate(over="ignore"):
        keys = np.zeros((signatures.shape[0], bands), np.uint64)
        for band in range(bands):
            key = np.full(signatures.shape[0], band + 1, np.uint64)
            for value in signatures[:, band * rows : (band + 1) * rows].T.astype(np.uint64):
                key = key * np.uint64(0x100000001B3) + value
                key ^= key >> np.uint64(29)
            keys[:, band] = key
    return keys


def _sign(
    chunk: Chunk, settings: CleanSettings, partitions: int, work: str, number: int
) -> tuple[np.ndarray, np.ndarray, dict[str, tuple[int, np.ndarray]]]:
    """Pass 1 for one chunk. Returns per document its UTF-8 bytes, the boilerplate lines removed,
    per document whether it was removed as emptied by boilerplate removal or as contaminated, and
    per evaluation set (contaminated documents, matched n-grams)."""
    rows = read_rows(chunk.path, chunk.start, chunk.end, ["text"])
    texts = [text or "" for text in rows.column("text").to_pylist()]
    sizes = np.array([len(text.encode("utf-8")) for text in texts], np.int64)
    boilerplate_lines = 0
    emptied = np.zeros(len(texts), bool)
    if settings.boilerplate_min_documents:
        boilerplate = _boilerplate(work)
        for row, text in enumerate(texts):
            texts[row], dropped = strip_lines(text, boilerplate, settings.lower_case)
            boilerplate_lines += dropped
            emptied[row] = dropped > 0 and not normalise(texts[row], settings.lower_case)
    contaminated = np.zeros(len(texts), bool)
    found: dict[str, list] = {}
    entries, shingle_rows, shingle_sets = [], [], []
    for row, text in enumerate(texts):
        if emptied[row]:  # removed: a text of nothing but boilerplate is no document
            continue
        normalised = normalise(text, settings.lower_case)
        hashes = word_hashes(words(normalised))
        ordinal = chunk.first + row
        if settings.removes_contaminated:
            shared = contamination.matches(ngram_hashes(hashes, settings.contamination_ngram, False))
            if shared:
                contaminated[row] = True
                for name, array in shared.items():
                    found.setdefault(name, []).append(array)
                continue
        if settings.exact:
            key = int.from_bytes(text_digest(normalised)[:8], "little")
            entries.append((key, ordinal, 0))
        if settings.near.enabled:
            shingles = ngram_hashes(hashes, settings.near.ngram, whole_if_shorter=True)
            if len(shingles):
                shingle_rows.append(ordinal)
                shingle_sets.append(shingles)
    if shingle_sets:
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in shingle_sets])]).astype(np.uint64)
        signatures = minhash_signatures(
            np.concatenate(shingle_sets), offsets, settings.near.num_perm, settings.seed
        )
        keys = band_keys(signatures, settings.near.bands)
        for ordinal, row_keys in zip(shingle_rows, keys):
            entries.extend((int(key), ordinal, 1) for key in row_keys)
    table = np.array(entries, ENTRY) if entries else np.zeros(0, ENTRY)
    part = table["key"] % np.uint64(partitions)
    for p in range(partitions):
        with (
            task_file(Path(work) / f"p{p:05d}" / f"s{number:07d}.npy") as building,
            open(building, "wb") as out,
        ):
            np.save(out, table[part == p])
    with task_file(Path(work) / "shingles" / f"s{number:07d}.parquet") as building:
        pq.write_table(
            pa.table(
                {"ordinal": shingle_rows, "shingles": _list_array(shingle_sets)}, schema=SHINGLES_SCHEMA
            ),
            building,
        )
    return (
        sizes,
        boilerplate_lines,
        emptied,
        contaminated,
        {name: (len(arrays), np.unique(np.concatenate(arrays))) for name, arrays in found.items()},
    )


def _count_lines(chunk: Chunk, lower_case: bool, partitions: int, work: str, number: int) -> None:
    """Boilerplate pass 1 for one chunk: each document's distinct line keys, each with the digest
    of the document's normalised text, into the partition files by key (a document counts once per
    line however often it repeats it, and copies of one text count once: pass 2)."""
    rows = read_rows(chunk.path, chunk.start, chunk.end, ["text"])
    lines = []
    for text in rows.column("text").to_pylist():
        keys = line_keys(text or "", lower_case)
        digest = int.from_bytes(text_digest(normalise(text or "", lower_case))[:8], "little")
        pairs = np.empty(len(keys), LINE)
        pairs["key"], pairs["text"] = keys, digest
        lines.append(pairs)
    lines = np.concatenate(lines) if lines else np.zeros(0, LINE)
    part = lines["key"] % np.uint64(partitions)
    for p in range(partitions):
        with (
            task_file(Path(work) / f"l{p:05d}" / f"s{number:07d}.npy") as building,
            open(building, "wb") as out,
        ):
            np.save(out, lines[part == p])


def _repeated_lines(work: str, partition: int, tasks: int, min_documents: int) -> np.ndarray:
    """Boilerplate pass 2 for one partition: the keys of lines in at least min_documents distinct
    texts (the (line, text) pairs made unique first)."""
    folder = Path(work) / f"l{partition:05d}"
    lines = np.unique(np.concatenate([np.load(folder / f"s{number:07d}.npy") for number in range(tasks)]))
    keys, counts = np.unique(lines["key"], return_counts=True)
    shutil.rmtree(folder)
    return keys[counts >= min_documents]


_boilerplate_keys: tuple[str, np.ndarray] | None = None  # in a worker: (work folder, its keys)


def _boilerplate(work: str) -> np.ndarray:
    """The boilerplate line keys of this run (read once per worker process and run)."""
    global _boilerplate_keys
    if _boilerplate_keys is None or _boilerplate_keys[0] != work:
        _boilerplate_keys = (work, np.load(Path(work) / "boilerplate.npy"))
    return _boilerplate_keys[1]


def _strip_boilerplate(work: str, lower_case: bool, text: str) -> str:
    return strip_lines(text, _boilerplate(work), lower_case)[0]


def _list_array(arrays: list[np.ndarray]) -> pa.ListArray:
    """A list<uint64> column from numpy arrays, without a Python list per value."""
    offsets = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int32)
    values = np.concatenate(arrays) if arrays else np.zeros(0, np.uint64)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.uint64()))


def _bucket(work: str, partition: int, signing_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    """Pass 2 for one partition: (exact pairs, candidate pairs), each [k, 2] int64 (first, other)."""
    folder = Path(work) / f"p{partition:05d}"
    table = np.concatenate([np.load(folder / f"s{number:07d}.npy") for number in range(signing_tasks)])
    exact, candidates = [], []
    for kind, out in ((0, exact), (1, candidates)):
        part = np.sort(table[table["kind"] == kind], order=["key", "ordinal"])
        if not len(part):
            continue
        bounds = np.flatnonzero(np.diff(part["key"])) + 1
        for members in np.split(part["ordinal"], bounds):
            members = np.unique(members)  # a document repeats in a bucket only by a key collision
            if len(members) < 2:
                continue
            if kind == 0:
                out.extend((members[0], other) for other in members[1:])
            elif len(members) <= MAX_BUCKET_PAIRS:
                out.extend((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
            else:
                out.extend((members[0], other) for other in members[1:])
                out.extend(zip(members[1:-1], members[2:]))
    shutil.rmtree(folder)
    as_array = lambda pairs: np.array(pairs, np.int64).reshape(-1, 2)  # noqa: E731
    return as_array(exact), as_array(candidates)


def _shingles_of(work: str, number: int, wanted: set[int]) -> dict[int, np.ndarray]:
    table = pq.read_table(Path(work) / "shingles" / f"s{number:07d}.parquet")
    column = table.column("shingles").combine_chunks()
    offsets, values = column.offsets.to_numpy(), column.values.to_numpy()
    return {
        ordinal: values[offsets[row] : offsets[row + 1]]
        for row, ordinal in enumerate(table.column("ordinal").to_pylist())
        if ordinal in wanted
    }


def _verify(
    work: str, pairs: np.ndarray, task_firsts: list[int], threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pass 3 for the candidate pairs whose first document lies in one signing task: the pairs at or
    above the threshold and their Jaccard similarities."""
    needed: dict[int, set[int]] = {}
    for ordinal in np.unique(pairs):
        needed.setdefault(_task_of(task_firsts, int(ordinal)), set()).add(int(ordinal))
    shingles = {}
    for number, ordinals in sorted(needed.items()):
        shingles.update(_shingles_of(work, number, ordinals))
    similarity = np.array([jaccard(shingles[int(a)], shingles[int(b)]) for a, b in pairs])
    keep = similarity >= threshold
    return pairs[keep], similarity[keep]


def _task_of(task_firsts: list[int], ordinal: int) -> int:
    return int(np.searchsorted(task_firsts, ordinal, side="right") - 1)


class _UnionFind:
    """Over the documents of pairs only; the root of a set is its smallest ordinal."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        root = x
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(x, x) != root:  # path compression
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)
            self.parent.setdefault(min(ra, rb), min(ra, rb))


def clean_corpora(
    inputs: dict[str, Path],
    output: Path,
    settings: CleanSettings,
    compute: Compute,
    eval_ngrams_file: Path | None,
    eval_sets: list[str],
) -> CleanResult:
    """Clean the document tables `inputs` (corpus name -> folder, in params' order) into
    output/<corpus>/ (the same part names, removed rows left out). `output` is an empty folder
    (the stage's atomic_folder); its `.work` subfolder holds the spill files while it runs."""
    names = list(inputs)
    chunks = list_chunks(list(inputs.values()))
    total = chunks[-1].first + chunks[-1].end - chunks[-1].start if chunks else 0
    work = output / ".work"
    partitions = _make_spill_folders(work, total, settings)
    initializer = (
        (contamination.load_ngrams, (str(eval_ngrams_file),)) if settings.removes_contaminated else (None, ())
    )
    with ComputePool(compute, *initializer) as pool:
        if settings.boilerplate_min_documents:
            _find_boilerplate(pool, chunks, settings, partitions, work)
        signed = _sign_all(pool, chunks, names, eval_sets, settings, partitions, work, total)
        exact_pairs, candidates = _bucket_all(pool, work, partitions, len(chunks))
        task_firsts = [chunk.first for chunk in chunks]
        near_pairs, near_similarity = _verify_all(
            pool, work, candidates, task_firsts, settings.near.threshold
        )
        removed_kind, roots = _removals(exact_pairs, near_pairs, signed)
        shutil.rmtree(work / "shingles")
        written = _write_all(pool, chunks, names, removed_kind, output, work, settings)
    shutil.rmtree(work)

    _check_documents_left(written, settings)
    metrics = _corpus_metrics(names, chunks, signed, written, removed_kind, roots, settings, eval_sets)
    metrics["all"] = {
        "documents_in": total,
        "documents_out": sum(documents for documents, _ in written.values()),
        "candidate_pairs": int(len(candidates)),
        "verified_near_pairs": int(len(near_pairs)),
    }
    samples = _samples(chunks, names, roots, removed_kind, near_pairs, near_similarity)
    return CleanResult(metrics, samples)


def _make_spill_folders(work: Path, total: int, settings: CleanSettings) -> int:
    """Make the spill folders of the bucket partitions and of the shingle sets; returns the number
    of partitions, enough for each to hold about ENTRIES_PER_PARTITION bucket entries."""
    entries_per_doc = int(settings.exact) + (settings.near.bands if settings.near.enabled else 0)
    partitions = max(1, math.ceil(total * entries_per_doc / ENTRIES_PER_PARTITION))
    for p in range(partitions):
        (work / f"p{p:05d}").mkdir(parents=True)
    (work / "shingles").mkdir(parents=True)
    return partitions


@dataclass
class _Signed:
    """What pass 1 found: per document (by ordinal) and per corpus."""

    sizes: np.ndarray  # UTF-8 bytes of each document
    emptied: np.ndarray  # each document: removed as emptied by boilerplate removal
    contaminated: np.ndarray  # each document: removed as sharing an n-gram with an evaluation set
    boilerplate_lines: dict[str, int]  # corpus -> boilerplate lines removed
    contaminated_documents: dict[str, dict[str, int]]  # corpus -> evaluation set -> documents
    matched_ngrams: dict[str, dict[str, list[np.ndarray]]]  # corpus -> evaluation set -> n-grams found


def _sign_all(
    pool: ComputePool,
    chunks: list[Chunk],
    names: list[str],
    eval_sets: list[str],
    settings: CleanSettings,
    partitions: int,
    work: Path,
    total: int,
) -> _Signed:
    """Pass 1 over every chunk: the buckets' entries and the shingle sets spilled under `work`."""
    sizes, emptied, contaminated = [], [], []
    lines = {name: 0 for name in names}
    documents = {name: {s: 0 for s in eval_sets} for name in names}
    ngrams = {name: {s: [] for s in eval_sets} for name in names}
    tasks = [(chunk, settings, partitions, str(work), number) for number, chunk in enumerate(chunks)]
    with tqdm(total=total, desc="clean: sign", unit=" docs") as bar:
        for chunk, (chunk_sizes, chunk_lines, chunk_emptied, chunk_contaminated, found) in zip(
            chunks, pool.map(_sign, tasks, describe=lambda task: task[0].describe())
        ):
            bar.update(len(chunk_sizes))
            corpus = names[chunk.corpus]
            lines[corpus] += chunk_lines
            sizes.append(chunk_sizes)
            emptied.append(chunk_emptied)
            contaminated.append(chunk_contaminated)
            for name, (count, shared) in found.items():
                documents[corpus][name] += count
                ngrams[corpus][name].append(shared)
    return _Signed(
        _joined(sizes, np.int64),
        _joined(emptied, bool),
        _joined(contaminated, bool),
        lines,
        documents,
        ngrams,
    )


def _joined(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype)


def _bucket_all(
    pool: ComputePool, work: Path, partitions: int, signing_tasks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pass 2 over every partition: (exact pairs, candidate pairs that are not exact ones), each
    pair once, sorted."""
    exact_pairs, candidate_pairs = [], []
    tasks = [(str(work), p, signing_tasks) for p in range(partitions)]
    for exact, candidates in tqdm(
        pool.map(_bucket, tasks, describe=lambda task: f"bucket partition {task[1]}"),
        total=partitions,
        desc="clean: buckets",
        unit=" partitions",
    ):
        exact_pairs.append(exact)
        candidate_pairs.append(candidates)
    exact_pairs = np.unique(np.concatenate(exact_pairs), axis=0)
    candidates = np.unique(np.concatenate(candidate_pairs), axis=0)
    if len(candidates) and len(exact_pairs):  # pairs already exact need no verification
        known = {tuple(pair) for pair in exact_pairs.tolist()}
        candidates = candidates[[tuple(pair) not in known for pair in candidates.tolist()]]
    return exact_pairs, candidates


def _verify_all(
    pool: ComputePool, work: Path, candidates: np.ndarray, task_firsts: list[int], threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pass 3, a task per signing task holding first documents of candidates: the near pairs and
    their Jaccard similarities."""
    near_pairs, near_similarity = [np.zeros((0, 2), np.int64)], [np.zeros(0)]
    if len(candidates):
        owner = np.searchsorted(task_firsts, candidates[:, 0], side="right") - 1
        groups = np.split(candidates, np.flatnonzero(np.diff(owner)) + 1)  # candidates are sorted
        tasks = [(str(work), group, task_firsts, threshold) for group in groups]
        for pairs, similarity in tqdm(
            pool.map(_verify, tasks, describe=lambda task: f"pairs of documents {task[1][0][0]}.."),
            total=len(tasks),
            desc="clean: verify",
            unit=" tasks",
        ):
            near_pairs.append(pairs)
            near_similarity.append(similarity)
    return np.concatenate(near_pairs), np.concatenate(near_similarity)


def _removals(
    exact_pairs: np.ndarray, near_pairs: np.ndarray, signed: _Signed
) -> tuple[dict[int, str], dict[int, int]]:
    """Pass 4: how each removed document goes ("exact", "near", "contaminated" or "emptied", by
    ordinal), and the kept document of each removed duplicate's cluster."""
    clusters = _UnionFind()
    for a, b in np.concatenate([exact_pairs, near_pairs]).tolist():
        clusters.union(a, b)
    removed_kind: dict[int, str] = {}
    exact_later = set(exact_pairs[:, 1].tolist())
    for ordinal in sorted(clusters.parent):
        if clusters.find(ordinal) != ordinal:
            removed_kind[ordinal] = "exact" if ordinal in exact_later else "near"
    for ordinal in np.flatnonzero(signed.contaminated).tolist():
        removed_kind[ordinal] = "contaminated"
    for ordinal in np.flatnonzero(signed.emptied).tolist():
        removed_kind[ordinal] = "emptied"
    roots = {o: clusters.find(o) for o, kind in removed_kind.items() if kind in ("exact", "near")}
    return removed_kind, roots


def _write_all(
    pool: ComputePool,
    chunks: list[Chunk],
    names: list[str],
    removed_kind: dict[int, str],
    output: Path,
    work: Path,
    settings: CleanSettings,
) -> dict[str, list[int]]:
    """Pass 5: each part file without its removed rows (and boilerplate lines) as
    output/<corpus>/<its name>; per corpus [documents, bytes] written."""
    removed_ordinals = np.array(sorted(removed_kind), np.int64)
    strip = (
        functools.partial(_strip_boilerplate, str(work), settings.lower_case)
        if settings.boilerplate_min_documents
        else None
    )
    files = _part_files(chunks)
    tasks = []
    for (corpus, path), (first, rows) in files.items():
        low, high = np.searchsorted(removed_ordinals, [first, first + rows])
        removed = (removed_ordinals[low:high] - first).tolist()
        (output / names[corpus]).mkdir(exist_ok=True)
        tasks.append((path, str(output / names[corpus] / Path(path).name), removed, strip))
    written = {name: [0, 0] for name in names}
    for (corpus, _), (documents, size) in zip(
        files, pool.map(write_kept, tasks, describe=lambda task: task[0])
    ):
        written[names[corpus]][0] += documents
        written[names[corpus]][1] += size
    return written


def _part_files(chunks: list[Chunk]) -> dict[tuple[int, str], tuple[int, int]]:
    """(corpus, part file) -> (its first ordinal, its rows), in table order."""
    files: dict[tuple[int, str], tuple[int, int]] = {}
    for chunk in chunks:
        first, rows = files.get((chunk.corpus, chunk.path), (chunk.first, 0))
        files[(chunk.corpus, chunk.path)] = (first, rows + chunk.end - chunk.start)
    return files


def _check_documents_left(written: dict[str, list[int]], settings: CleanSettings) -> None:
    for name, (documents, _) in written.items():
        if documents == 0:
            params = "clean.near.threshold" + (
                ", clean.boilerplate_min_documents" if settings.boilerplate_min_documents else ""
            )
            raise UserError(f"corpus {name}: cleaning removed every document; check {params} or the corpus")


def _corpus_metrics(
    names: list[str],
    chunks: list[Chunk],
    signed: _Signed,
    written: dict[str, list[int]],
    removed_kind: dict[int, str],
    roots: dict[int, int],
    settings: CleanSettings,
    eval_sets: list[str],
) -> dict:
    """Each corpus's figures (metrics/clean.json), keyed by its name."""
    corpus_of = np.repeat(
        np.array([chunk.corpus for chunk in chunks], np.int32), [chunk.end - chunk.start for chunk in chunks]
    )
    metrics = {}
    for index, name in enumerate(names):
        in_corpus = corpus_of == index
        metrics[name] = {
            "documents_in": int(in_corpus.sum()),
            "bytes_in": int(signed.sizes[in_corpus].sum()),
            "documents_out": written[name][0],
            "bytes_out": written[name][1],
            "exact_duplicates": sum(
                1 for o, k in removed_kind.items() if k == "exact" and corpus_of[o] == index
            ),
            "near_duplicates_removed": sum(
                1 for o, k in removed_kind.items() if k == "near" and corpus_of[o] == index
            ),
            "duplicate_clusters_kept_here": len({r for r in roots.values() if corpus_of[r] == index}),
            "boilerplate_lines_removed": signed.boilerplate_lines[name],
            "duplicates_of_another_corpus": sum(
                1 for o, r in roots.items() if corpus_of[o] == index and corpus_of[r] != index
            ),
        }
        if settings.boilerplate_min_documents:  # (only then: the default's figures keep their bytes)
            metrics[name]["emptied_by_boilerplate"] = int(signed.emptied[in_corpus].sum())
        if settings.removes_contaminated:
            metrics[name]["contamination_removed"] = {
                s: {
                    "contaminated_documents": signed.contaminated_documents[name][s],
                    "matched_ngrams": int(len(np.unique(np.concatenate(signed.matched_ngrams[name][s]))))
                    if signed.matched_ngrams[name][s]
                    else 0,
                }
                for s in eval_sets
            }
    return metrics


def _find_boilerplate(
    pool: ComputePool, chunks: list[Chunk], settings: CleanSettings, partitions: int, work: Path
) -> None:
    """Count each line's documents (partitioned by the line's key) and write the keys of lines in
    at least boilerplate_min_documents documents to work/boilerplate.npy, sorted."""
    for p in range(partitions):
        (work / f"l{p:05d}").mkdir()
    count_tasks = [(chunk, settings.lower_case, partitions, str(work), n) for n, chunk in enumerate(chunks)]
    for _ in tqdm(
        pool.map(_count_lines, count_tasks, describe=lambda task: task[0].describe()),
        total=len(chunks),
        desc="clean: lines",
        unit=" tasks",
    ):
        pass
    tasks = [(str(work), p, len(chunks), settings.boilerplate_min_documents) for p in range(partitions)]
    repeated = list(pool.map(_repeated_lines, tasks, describe=lambda task: f"line partition {task[1]}"))
    keys = np.sort(np.concatenate(repeated)) if repeated else np.zeros(0, np.uint64)
    with task_file(work / "boilerplate.npy") as building, open(building, "wb") as out:
        np.save(out, keys)


def _first_line(chunks: list[Chunk], task_firsts: list[int], ordinal: int) -> tuple[str, str]:
    chunk = chunks[_task_of(task_firsts, ordinal)]
    row = chunk.start + ordinal - chunk.first
    table = read_rows(chunk.path, row, row + 1, ["doc_id", "text"])
    text = (table.column("text")[0].as_py() or "").strip().split("\n", 1)[0]
    return table.column("doc_id")[0].as_py(), text[:160]


def _samples(chunks, names, roots, removed_kind, near_pairs, near_similarity) -> list[str]:
    """The first removed documents (by ordinal), each beside the kept one, first lines only."""
    task_firsts = [chunk.first for chunk in chunks]
    similarity = {(int(a), int(b)): float(s) for (a, b), s in zip(near_pairs.tolist(), near_similarity)}
    lines = []
    for ordinal in heapq.nsmallest(SAMPLE_PAIRS, roots):
        kept = roots[ordinal]
        score = similarity.get((min(kept, ordinal), max(kept, ordinal)))
        how = removed_kind[ordinal] + (
            f", Jaccard {score:.3f} with the kept one" if score is not None else ""
        )
        removed_id, removed_line = _first_line(chunks, task_firsts, ordinal)
        kept_id, kept_line = _first_line(chunks, task_firsts, kept)
        lines += [
            f"removed ({how}): {names[chunks[_task_of(task_firsts, ordinal)].corpus]} {removed_id}",
            f"    {removed_line}",
            f"kept: {names[chunks[_task_of(task_firsts, kept)].corpus]} {kept_id}",
            f"    {kept_line}",
            "",
        ]
    return lines
