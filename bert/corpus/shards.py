"""Document table -> sentence-segmented, size-balanced train/test shards.

Four passes, so memory stays bounded by a group of documents plus a few integers per document,
whatever the corpus size, and the driver (the stage's process) handles numbers only:

1. Segment, on the workers. A task is a run of at most CHUNK_DOCUMENTS rows of one row group of
   the document table, fixed by the table's layout (its Parquet metadata, read by the driver)
   and never by the number of workers. The worker reads those rows itself, segments them into
   sentences, drops documents with fewer than `min_sentences` sentences, writes the rest to its
   own chunk file and returns only their sizes (UTF-8 bytes of the sentences) and sentence counts.
2. Pack, in the driver, from the sizes alone: a seeded permutation of the documents is walked
   until `test_fraction` of the total size is reached (those become test documents); each group
   is then bin-packed largest-first into its shards (each document to the currently smallest
   shard), so shards are balanced by size and no document is split.
3. Scatter, on the workers: a task takes a run of chunk files holding about GROUP_BYTES of
   sentences and rewrites them as one group file sorted by shard (stably, so a shard's documents
   keep input order), each shard's documents one row group.
4. Gather, on the workers: a task per shard reads its row group of every group file, in order,
   and writes the shard, a row group closing after the document that brings it to ROW_GROUP_BYTES.

Every file is written under a temporary name and renamed, so a task run again replaces a dead
one's file whole. Nothing depends on timing or on the number of workers (the groups of pass 3 do
not even reach the output): the same inputs and parameters give byte-identical shards on any
scheduler.
"""

import heapq
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from bert.atomic import atomic_folder, task_file
from bert.compute import Compute
from bert.corpus import sentences as punkt
from bert.corpus.documents import document_files, open_document_table, read_rows
from bert.corpus.sentence_shards import SHARD_SCHEMA
from bert.errors import UserError
from bert.parallel import ComputePool

log = logging.getLogger(__name__)

CHUNK_DOCUMENTS = 256
GROUP_BYTES = 32 * 2**20  # sentences per scatter task (its memory: about twice this)
ROW_GROUP_BYTES = 4 * 2**20
MANIFEST_FILE = "manifest.json"


def read_documents(files: list[Path]) -> Iterator[list[tuple[str, str]]]:
    """Chunks of (doc_id, text) in table order (the driver reads them only to train Punkt)."""
    for path in files:
        try:
            for batch in open_document_table(path).iter_batches(
                batch_size=CHUNK_DOCUMENTS, columns=["doc_id", "text"]
            ):
                yield list(zip(batch.column("doc_id").to_pylist(), batch.column("text").to_pylist()))
        except (OSError, pa.ArrowInvalid) as error:
            raise UserError(f"{path}: cannot read this Parquet file ({error})") from None


def segment_tasks(files: list[Path]) -> Iterator[tuple[str, int, int]]:
    """(file, first row, end row) of every segmentation task, from the files' metadata alone."""
    for path in files:
        metadata = open_document_table(path).metadata
        first = 0
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            for start in range(first, first + rows, CHUNK_DOCUMENTS):
                yield str(path), start, min(start + CHUNK_DOCUMENTS, first + rows)
            first += rows


_splitter: punkt.SentenceSplitter | None = None


def _init_worker(parameters_file: str | None) -> None:
    global _splitter
    parameters = (
        punkt.pretrained_parameters() if parameters_file is None else punkt.load_parameters(parameters_file)
    )
    _splitter = punkt.SentenceSplitter(parameters, curated=parameters_file is not None)


def _segment(
    path: str, start: int, end: int, chunk_file: str, min_sentences: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Segment rows [start, end) of a document file into `chunk_file`: (bytes, sentences) of each
    document kept, and how many were dropped."""
    rows = read_rows(path, start, end, ["doc_id", "text"])
    doc_ids, documents, dropped = [], [], 0
    for doc_id, text in zip(rows.column("doc_id").to_pylist(), rows.column("text").to_pylist()):
        sentences = _splitter.split(text or "")
        if len(sentences) < min_sentences:
            dropped += 1
        else:
            doc_ids.append(doc_id)
            documents.append(sentences)
    with task_file(Path(chunk_file)) as building:
        pq.write_table(pa.table({"doc_id": doc_ids, "sentences": documents}, schema=SHARD_SCHEMA), building)
    sizes = np.array([sum(len(s.encode("utf-8")) for s in sentences) for sentences in documents], np.int64)
    return sizes, np.array([len(sentences) for sentences in documents], np.int64), dropped


def split_train_test(sizes: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """A boolean mask of test documents: a seeded random subset holding ~test_fraction of the size."""
    is_test = np.zeros(len(sizes), dtype=bool)
    if test_fraction <= 0 or len(sizes) < 2:
        return is_test
    order = np.random.default_rng(seed).permutation(len(sizes))
    cumulative = np.cumsum(sizes[order])
    count = int(np.searchsorted(cumulative, test_fraction * cumulative[-1])) + 1
    is_test[order[: min(count, len(sizes) - 1)]] = True
    return is_test


def pack_largest_first(indices: np.ndarray, sizes: np.ndarray, num_bins: int) -> dict[int, int]:
    """Assign documents to `num_bins` bins, largest first, each to the currently smallest bin."""
    heap = [(0, b) for b in range(num_bins)]
    assignment = {}
    for index in sorted(indices.tolist(), key=lambda i: (-int(sizes[i]), i)):
        load, b = heapq.heappop(heap)
        assignment[index] = b
        heapq.heappush(heap, (load + int(sizes[index]), b))
    return assignment


def chunk_groups(chunk_bytes: np.ndarray) -> list[tuple[int, int]]:
    """[first, end) chunk ranges of the scatter tasks: consecutive chunks, a range closing once it
    holds GROUP_BYTES of sentences."""
    groups, first, held = [], 0, 0
    for index, size in enumerate(chunk_bytes.tolist()):
        held += size
        if held >= GROUP_BYTES:
            groups.append((first, index + 1))
            first, held = index + 1, 0
    if first < len(chunk_bytes):
        groups.append((first, len(chunk_bytes)))
    return groups


def _scatter(chunk_files: list[str], shard_of: np.ndarray, group_file: str) -> list[int]:
    """The documents of `chunk_files` into `group_file`, sorted by their shard (`shard_of`, in
    input order), each shard's documents one row group; returns the shard of each row group."""
    table = pa.concat_tables([pq.read_table(path) for path in chunk_files])
    order = np.argsort(shard_of, kind="stable")  # each shard's rows, in input order
    shards, starts, counts = np.unique(shard_of[order], return_index=True, return_counts=True)
    with task_file(Path(group_file)) as building, pq.ParquetWriter(building, SHARD_SCHEMA) as writer:
        for begin, rows in zip(starts.tolist(), counts.tolist()):  # a shard at a time: one copy of the text
            writer.write_table(table.take(order[begin : begin + rows]), row_group_size=rows)
    return shards.tolist()


def _gather(shard_file: str, parts: list[tuple[str, int]], sizes: np.ndarray) -> None:
    """Write a shard from its row group of each group file (`parts`, in input order), given the
    sizes of its documents; a row group closes after the document that brings it to
    ROW_GROUP_BYTES of sentences."""
    with (
        task_file(Path(shard_file)) as building,
        pq.ParquetWriter(building, SHARD_SCHEMA, compression="zstd") as writer,
    ):
        waiting, waiting_bytes, first = [], 0, 0
        for group_file, row_group in parts:
            rows = pq.ParquetFile(group_file).read_row_group(row_group)
            filled = waiting_bytes + np.cumsum(sizes[first : first + len(rows)])
            first += len(rows)
            begin = 0
            while (full := int(np.searchsorted(filled, ROW_GROUP_BYTES))) < len(rows):
                waiting.append(rows.slice(begin, full + 1 - begin))
                writer.write_table(pa.concat_tables(waiting).combine_chunks())
                waiting, filled, begin = [], filled - filled[full], full + 1
            waiting.append(rows.slice(begin))
            waiting_bytes = int(filled[-1]) if len(rows) else waiting_bytes
        waiting = [table for table in waiting if len(table)]
        if waiting:
            writer.write_table(pa.concat_tables(waiting).combine_chunks())


def _parameters(files: list[Path], mode: str, out_dir: Path, training_chars: int) -> tuple[str | None, dict]:
    """Decide the Punkt parameters; returns (parameter file or None for pretrained, manifest info)."""
    if mode in ("auto", "pretrained") and punkt.pretrained_parameters() is not None:
        log.info("Punkt: NLTK's pretrained English parameters")
        return None, {"punkt": "pretrained (nltk punkt_tab english)"}
    if mode == "pretrained":
        raise UserError(
            "shard.punkt is `pretrained` but NLTK's punkt_tab data is not installed; "
            "run `python -m nltk.downloader punkt_tab` or set shard.punkt to `auto` or `train`"
        )
    texts = (text or "" for chunk in read_documents(files) for _, text in chunk)
    start = time.perf_counter()
    parameters, used = punkt.train_parameters(texts, training_chars)
    path = out_dir / punkt.PUNKT_FILE
    punkt.save_parameters(parameters, path)
    log.info(
        "Punkt: trained on the first %.1f MB of the corpus in %.1fs -> %s",
        used / 1e6,
        time.perf_counter() - start,
        path.name,
    )
    return str(path), {
        "punkt": f"trained on the first {used} characters of the corpus",
        "punkt_file": punkt.PUNKT_FILE,
    }


def shard_corpus(
    documents_dir: str | Path,
    out_dir: str | Path,
    *,
    num_train_shards: int,
    num_test_shards: int,
    test_fraction: float,
    min_sentences: int,
    punkt_mode: str,
    seed: int,
    compute: Compute | int,
    training_chars: int = punkt.DEFAULT_TRAINING_CHARS,
) -> dict:
    """Segment and shard a document table into `out_dir` (atomically). Returns the metrics.

    Four passes, each on the workers, the driver handling sizes only: segment the documents into
    chunk files; assign each document to a shard (train/test split, then packed by size); scatter
    the chunks' rows into groups sorted by shard; gather each shard from its row groups."""
    files = document_files(documents_dir)
    start = time.perf_counter()
    with atomic_folder(out_dir) as tmp_dir:
        parameters_file, manifest = _parameters(files, punkt_mode, tmp_dir, training_chars)
        punkt_seconds = time.perf_counter() - start
        chunk_dir = tmp_dir / ".chunks"
        chunk_dir.mkdir()
        with ComputePool(compute, _init_worker, (parameters_file,)) as pool:
            chunks = _segment_documents(pool, files, chunk_dir, min_sentences)
            if not len(chunks.sizes):
                raise UserError(
                    f"{documents_dir}: no document has at least {min_sentences} sentences ({chunks.dropped} "
                    "dropped); the corpus is empty or shard.min_sentences is too high"
                )
            segment_seconds = time.perf_counter() - start - punkt_seconds
            plan = _plan_shards(chunks, num_train_shards, num_test_shards, test_fraction, seed)
            parts = _scatter_by_shard(pool, chunks, plan, chunk_dir)
            _gather_shards(pool, tmp_dir, plan, parts)
        shutil.rmtree(chunk_dir)

        seconds = time.perf_counter() - start
        train_bytes = plan.bytes[:num_train_shards]
        sentences_total = int(chunks.sentences.sum())
        metrics = {
            "documents": len(chunks.sizes),
            "sentences": sentences_total,
            "dropped": chunks.dropped,
            "train_documents": int((~plan.is_test).sum()),
            "test_documents": int(plan.is_test.sum()),
            "test_bytes_fraction": round(float(chunks.sizes[plan.is_test].sum() / chunks.sizes.sum()), 4),
            "train_shard_balance": round(min(train_bytes) / max(max(train_bytes), 1), 4),
            "seconds": round(seconds, 3),
            "punkt_training_seconds": round(punkt_seconds, 3),
            "sentences_per_second": round(sentences_total / max(segment_seconds, 1e-9), 1),
            "workers": Compute.of(compute).workers,
            "scheduler": Compute.of(compute).scheduler,
        }
        manifest.update(
            shards=[
                {"file": name, "documents": d, "sentences": s, "bytes": b}
                for name, d, s, b in zip(plan.names, plan.documents.tolist(), plan.sentences, plan.bytes)
            ],
            min_sentences=min_sentences,
            test_fraction=test_fraction,
            seed=seed,
            documents=metrics["documents"],
            sentences=sentences_total,
            dropped=chunks.dropped,
        )
        (tmp_dir / MANIFEST_FILE).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    log.info(
        "%d documents, %d sentences (%d documents dropped) -> %d shards in %.1fs (%.0f sentences/s)",
        metrics["documents"], sentences_total, chunks.dropped, len(plan.names), seconds,
        metrics["sentences_per_second"],
    )  # fmt: skip
    if num_test_shards and test_fraction > 0:
        warn_if_test_share_is_off(metrics["test_bytes_fraction"], test_fraction, metrics["test_documents"],
                                  metrics["documents"])  # fmt: skip
    return metrics


def warn_if_test_share_is_off(achieved: float, wanted: float, test_documents: int, documents: int) -> None:
    """A warning when the test shards' share of the bytes is off `wanted` by more than half of it:
    documents never straddle shards, so in a small corpus one document can be most of the test set."""
    if abs(achieved - wanted) <= wanted / 2:
        return
    log.warning(
        "the test shards hold %.1f%% of the bytes (%d of %d documents) against shard.test_fraction %g: "
        "documents never straddle shards, and this corpus has too few (or too uneven) documents to come "
        "closer; the achieved share is test_bytes_fraction in the shard metrics",
        100 * achieved, test_documents, documents, wanted,
    )  # fmt: skip


@dataclass
class _Chunks:
    """Pass 1's result: the chunk files in document order, and per kept document its size (bytes
    of sentences) and sentence count."""

    files: list[str]
    rows: list[int]  # documents kept in each chunk
    chunk_sizes: list[np.ndarray]
    sizes: np.ndarray
    sentences: np.ndarray
    dropped: int


def _segment_documents(pool: ComputePool, files: list[Path], chunk_dir: Path, min_sentences: int) -> _Chunks:
    """Pass 1: segment on the workers, each chunk of documents into its own file; sizes come back
    in order."""
    tasks = [
        (path, begin, end, str(chunk_dir / f"chunk-{index:06d}.parquet"), min_sentences)
        for index, (path, begin, end) in enumerate(segment_tasks(files))
    ]
    sizes, sentence_counts, chunk_rows = [], [], []
    dropped = 0
    with tqdm(desc="segment", unit=" docs", leave=False) as progress:
        results = pool.map(
            _segment, tasks, describe=lambda task: f"documents {task[1]} to {task[2] - 1} of {task[0]}"
        )
        for chunk_sizes, chunk_sentences, chunk_dropped in results:
            progress.update(len(chunk_sizes) + chunk_dropped)
            dropped += chunk_dropped
            sizes.append(chunk_sizes)
            sentence_counts.append(chunk_sentences)
            chunk_rows.append(len(chunk_sizes))
    return _Chunks(
        files=[task[3] for task in tasks],
        rows=chunk_rows,
        chunk_sizes=sizes,
        sizes=np.concatenate(sizes) if sizes else np.zeros(0, np.int64),
        sentences=np.concatenate(sentence_counts) if sentence_counts else np.zeros(0, np.int64),
        dropped=dropped,
    )


@dataclass
class _ShardPlan:
    """Pass 2's result: which shard each document goes to, and what each shard will hold."""

    names: list[str]
    is_test: np.ndarray
    shard_of: np.ndarray  # per document
    documents: np.ndarray  # per shard
    sizes: list[np.ndarray]  # per shard: its documents' sizes, in input order
    bytes: list[int]
    sentences: list[int]


def _plan_shards(
    chunks: _Chunks, num_train: int, num_test: int, test_fraction: float, seed: int
) -> _ShardPlan:
    """Pass 2: split train/test by size (seeded), then pack each side's documents, largest first,
    into its shards."""
    is_test = split_train_test(chunks.sizes, test_fraction if num_test else 0.0, seed)
    shard_of = np.empty(len(chunks.sizes), dtype=np.int64)
    for index, shard in pack_largest_first(np.flatnonzero(~is_test), chunks.sizes, num_train).items():
        shard_of[index] = shard
    for index, shard in pack_largest_first(np.flatnonzero(is_test), chunks.sizes, max(num_test, 1)).items():
        shard_of[index] = num_train + shard
    names = [f"train_{i:05d}.parquet" for i in range(num_train)]
    names += [f"test_{i:05d}.parquet" for i in range(num_test)]
    documents = np.bincount(shard_of, minlength=len(names))
    by_shard = np.argsort(shard_of, kind="stable")  # each shard's documents, in input order
    sizes = np.split(chunks.sizes[by_shard], np.cumsum(documents)[:-1])
    sentences = np.bincount(shard_of, chunks.sentences, minlength=len(names)).astype(np.int64).tolist()
    return _ShardPlan(names, is_test, shard_of, documents, sizes, [int(s.sum()) for s in sizes], sentences)


def _scatter_by_shard(
    pool: ComputePool, chunks: _Chunks, plan: _ShardPlan, chunk_dir: Path
) -> list[list[tuple[str, int]]]:
    """Pass 3: scatter each group of chunks into one file sorted by shard (a row group per shard
    it holds); returns each shard's (group file, row group) parts. The chunk files are removed."""
    chunk_ends = np.cumsum(chunks.rows)
    chunk_bytes = np.array([int(chunk.sum()) for chunk in chunks.chunk_sizes], np.int64)
    scatter_tasks = []
    for index, (first, end) in enumerate(chunk_groups(chunk_bytes)):
        rows = slice(int(chunk_ends[first] - chunks.rows[first]), int(chunk_ends[end - 1]))
        group_file = str(chunk_dir / f"group-{index:06d}.parquet")
        scatter_tasks.append((chunks.files[first:end], plan.shard_of[rows], group_file))
    scattered = pool.map(
        _scatter,
        scatter_tasks,
        describe=lambda task: (
            f"scattering {Path(task[0][0]).name} to {Path(task[0][-1]).name} of {chunk_dir}"
        ),
    )
    parts: list[list[tuple[str, int]]] = [[] for _ in plan.names]
    progress = tqdm(scattered, total=len(scatter_tasks), desc="scatter", unit=" groups", leave=False)
    for (chunk_files, _, group_file), group_shards in zip(scatter_tasks, progress):
        for row_group, shard in enumerate(group_shards):
            parts[shard].append((group_file, row_group))
        for chunk_file in chunk_files:
            os.unlink(chunk_file)
    return parts


def _gather_shards(pool: ComputePool, out_dir: Path, plan: _ShardPlan, parts: list) -> None:
    """Pass 4: write each shard from its row groups."""
    tasks = [(str(out_dir / name), parts[shard], plan.sizes[shard]) for shard, name in enumerate(plan.names)]
    gathered = pool.map(_gather, tasks, describe=lambda task: f"writing shard {task[0]}")
    for _ in tqdm(gathered, total=len(tasks), desc="gather", unit=" shards", leave=False):
        pass
