"""Document table -> sentence-segmented, size-balanced train/test shards.

Streaming in two passes, so memory stays bounded by a chunk of documents plus a few integers per
document, whatever the corpus size:

1. Segment, on the workers. A task is a run of at most CHUNK_DOCUMENTS rows of one row group of
   the document table, fixed by the table's layout (its Parquet metadata, read by the driver)
   and never by the number of workers. The worker reads those rows itself, segments them into
   sentences, drops documents with fewer than `min_sentences` sentences, writes the rest to its
   own temporary chunk file and returns only their sizes (UTF-8 bytes of the sentences) and
   sentence counts: no text passes through the driver.
2. Pack and write, in the driver, on Arrow arrays. From the sizes alone: a seeded permutation of
   the documents is walked until `test_fraction` of the total size is reached (those become test
   documents); each group is then bin-packed largest-first into its shards (each document to the
   currently smallest shard), so shards are balanced by size and no document is split. The chunk
   files are read once more in order and their rows taken into their shards (a shard keeps input
   order), row groups closing after ROW_GROUP_BYTES of sentences.

Nothing depends on timing or on the number of workers: the same inputs and parameters give
byte-identical shards on any scheduler.
"""

import heapq
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from bert.atomic import atomic_folder, temporary_file
from bert.compute import Compute
from bert.corpus import sentences as punkt
from bert.corpus.documents import document_files
from bert.corpus.sentence_shards import SHARD_SCHEMA
from bert.errors import UserError
from bert.parallel import Workers

log = logging.getLogger(__name__)

CHUNK_DOCUMENTS = 256
ROW_GROUP_BYTES = 4 * 2**20
MANIFEST_FILE = "manifest.json"


def _open_table(path: Path) -> pq.ParquetFile:
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise UserError(f"{path}: cannot read this Parquet file ({error})") from None
    missing = {"doc_id", "text"} - set(parquet.schema_arrow.names)
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(sorted(missing))}; not a document table")
    return parquet


def read_documents(files: list[Path]) -> Iterator[list[tuple[str, str]]]:
    """Chunks of (doc_id, text) in table order (the driver reads them only to train Punkt)."""
    for path in files:
        try:
            for batch in _open_table(path).iter_batches(
                batch_size=CHUNK_DOCUMENTS, columns=["doc_id", "text"]
            ):
                yield list(zip(batch.column("doc_id").to_pylist(), batch.column("text").to_pylist()))
        except (OSError, pa.ArrowInvalid) as error:
            raise UserError(f"{path}: cannot read this Parquet file ({error})") from None


def segment_tasks(files: list[Path]) -> Iterator[tuple[str, int, int]]:
    """(file, first row, end row) of every segmentation task, from the files' metadata alone."""
    for path in files:
        metadata = _open_table(path).metadata
        first = 0
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            for start in range(first, first + rows, CHUNK_DOCUMENTS):
                yield str(path), start, min(start + CHUNK_DOCUMENTS, first + rows)
            first += rows


def _read_rows(path: str, start: int, end: int) -> pa.Table:
    """doc_id and text of rows [start, end) of a document file, reading only their row groups."""
    try:
        parquet = pq.ParquetFile(path)
        groups, first, offset = [], 0, None
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if first < end and start < first + rows:
                groups.append(group)
                offset = first if offset is None else offset
            first += rows
        table = parquet.read_row_groups(groups, columns=["doc_id", "text"])
    except (OSError, pa.ArrowInvalid) as error:
        raise UserError(f"{path}: cannot read this Parquet file ({error})") from None
    return table.slice(start - (offset or 0), end - start)


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
    rows = _read_rows(path, start, end)
    doc_ids, documents, dropped = [], [], 0
    for doc_id, text in zip(rows.column("doc_id").to_pylist(), rows.column("text").to_pylist()):
        sentences = _splitter.split(text or "")
        if len(sentences) < min_sentences:
            dropped += 1
        else:
            doc_ids.append(doc_id)
            documents.append(sentences)
    # under a temporary name, then renamed: a retried task replaces a dead one's file whole
    building = temporary_file(Path(chunk_file))
    try:
        pq.write_table(pa.table({"doc_id": doc_ids, "sentences": documents}, schema=SHARD_SCHEMA), building)
        os.replace(building, chunk_file)
    finally:
        building.unlink(missing_ok=True)
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


class _ShardWriters:
    """The shard files, fed whole chunks of documents as Arrow tables; a row group closes after the
    document that brings it to ROW_GROUP_BYTES of sentences."""

    def __init__(self, paths: list[Path]):
        self.writers = [pq.ParquetWriter(p, SHARD_SCHEMA, compression="zstd") for p in paths]
        self.buffers: list[list[pa.Table]] = [[] for _ in paths]
        self.buffered = [0] * len(paths)
        self.documents = [0] * len(paths)
        self.sentences = [0] * len(paths)
        self.bytes = [0] * len(paths)

    def add(self, shard: int, rows: pa.Table, sizes: np.ndarray, sentences: np.ndarray) -> None:
        self.documents[shard] += len(sizes)
        self.sentences[shard] += int(sentences.sum())
        self.bytes[shard] += int(sizes.sum())
        begin = 0
        filled = self.buffered[shard] + np.cumsum(sizes)
        while (full := int(np.searchsorted(filled, ROW_GROUP_BYTES))) < len(sizes):
            self.buffers[shard].append(rows.slice(begin, full + 1 - begin))
            self._flush(shard)
            filled -= filled[full]
            begin = full + 1
        self.buffers[shard].append(rows.slice(begin))
        self.buffered[shard] = int(filled[-1]) if len(sizes) else self.buffered[shard]

    def _flush(self, shard: int) -> None:
        tables = [table for table in self.buffers[shard] if len(table)]
        if tables:
            self.writers[shard].write_table(pa.concat_tables(tables).combine_chunks())
        self.buffers[shard] = []
        self.buffered[shard] = 0

    def close(self) -> None:
        for shard, writer in enumerate(self.writers):
            self._flush(shard)
            writer.close()


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
    punkt_mode: str = "auto",
    seed: int = 0,
    compute: Compute | int = 1,
    training_chars: int = punkt.DEFAULT_TRAINING_CHARS,
) -> dict:
    """Segment and shard a document table into `out_dir` (atomically). Returns the metrics."""
    files = document_files(documents_dir)
    start = time.perf_counter()
    with atomic_folder(out_dir) as tmp_dir:
        parameters_file, manifest = _parameters(files, punkt_mode, tmp_dir, training_chars)
        punkt_seconds = time.perf_counter() - start
        chunk_dir = tmp_dir / ".chunks"
        chunk_dir.mkdir()

        # Pass 1: segment on the workers, each chunk into its own file; sizes come back in order.
        tasks = [
            (path, begin, end, str(chunk_dir / f"chunk-{index:06d}.parquet"), min_sentences)
            for index, (path, begin, end) in enumerate(segment_tasks(files))
        ]
        sizes, sentence_counts, chunk_rows = [], [], []
        dropped = 0
        with (
            Workers(compute, _init_worker, (parameters_file,)) as pool,
            tqdm(desc="segment", unit=" docs", leave=False) as progress,
        ):
            results = pool.map(
                _segment, tasks, describe=lambda task: f"documents {task[1]} to {task[2] - 1} of {task[0]}"
            )
            for chunk_sizes, chunk_sentences, chunk_dropped in results:
                progress.update(len(chunk_sizes) + chunk_dropped)
                dropped += chunk_dropped
                sizes.append(chunk_sizes)
                sentence_counts.append(chunk_sentences)
                chunk_rows.append(len(chunk_sizes))
        size_array = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        sentence_array = np.concatenate(sentence_counts) if sentence_counts else np.zeros(0, np.int64)
        sentences_total = int(sentence_array.sum())
        segment_seconds = time.perf_counter() - start - punkt_seconds
        if not len(size_array):
            raise UserError(
                f"{documents_dir}: no document has at least {min_sentences} sentences ({dropped} dropped); "
                "the corpus is empty or shard.min_sentences is too high"
            )

        # Pass 2: split, pack by size, write the shards.
        is_test = split_train_test(size_array, test_fraction if num_test_shards else 0.0, seed)
        shard_of = np.empty(len(size_array), dtype=np.int64)
        for index, shard in pack_largest_first(
            np.flatnonzero(~is_test), size_array, num_train_shards
        ).items():
            shard_of[index] = shard
        for index, shard in pack_largest_first(
            np.flatnonzero(is_test), size_array, max(num_test_shards, 1)
        ).items():
            shard_of[index] = num_train_shards + shard
        names = [f"train_{i:05d}.parquet" for i in range(num_train_shards)]
        names += [f"test_{i:05d}.parquet" for i in range(num_test_shards)]
        writers = _ShardWriters([tmp_dir / name for name in names])
        first = 0
        for task, rows in zip(tqdm(tasks, desc="write shards", unit=" chunks", leave=False), chunk_rows):
            if rows == 0:
                continue
            table = pq.read_table(task[3])
            chunk = slice(first, first + rows)
            order = np.argsort(shard_of[chunk], kind="stable")  # each shard's rows, in input order
            shards, starts = np.unique(shard_of[chunk][order], return_index=True)
            for shard, taken in zip(shards, np.split(order, starts[1:])):
                writers.add(
                    int(shard), table.take(taken), size_array[chunk][taken], sentence_array[chunk][taken]
                )
            first += rows
        writers.close()
        shutil.rmtree(chunk_dir)

        seconds = time.perf_counter() - start
        train_bytes = writers.bytes[:num_train_shards]
        metrics = {
            "documents": len(size_array),
            "sentences": sentences_total,
            "dropped": dropped,
            "train_documents": int((~is_test).sum()),
            "test_documents": int(is_test.sum()),
            "test_bytes_fraction": round(float(size_array[is_test].sum() / size_array.sum()), 4),
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
                for name, d, s, b in zip(names, writers.documents, writers.sentences, writers.bytes)
            ],
            min_sentences=min_sentences,
            test_fraction=test_fraction,
            seed=seed,
            documents=metrics["documents"],
            sentences=sentences_total,
            dropped=dropped,
        )
        (tmp_dir / MANIFEST_FILE).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    log.info(
        "%d documents, %d sentences (%d documents dropped) -> %d shards in %.1fs (%.0f sentences/s)",
        metrics["documents"], sentences_total, dropped, len(names), seconds, metrics["sentences_per_second"],
    )  # fmt: skip
    return metrics
