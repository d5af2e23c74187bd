"""Document table -> sentence-segmented, size-balanced train/test shards.

Streaming in two passes, so memory stays bounded by a chunk of documents plus three integers per
document, whatever the corpus size:

1. Segment. Documents are read in order in fixed chunks of CHUNK_DOCUMENTS, segmented into
   sentences by worker processes (bert.parallel: results come back in input order), filtered
   (fewer than `min_sentences` sentences: dropped) and written to temporary Parquet chunk files.
   The size of every kept document (UTF-8 bytes of its sentences) is recorded.
2. Pack and write. From the sizes alone: a seeded permutation of the documents is walked until
   `test_fraction` of the total size is reached (those become test documents); each group is then
   bin-packed largest-first into its shards (each document to the currently smallest shard), so
   shards are balanced by size and no document is split. The chunk files are read once more in
   order and every document is appended to its shard (so a shard keeps input order).

Chunks are fixed by the input, never by the number of workers, and nothing depends on timing:
the same inputs and parameters give byte-identical shards with any `workers`.
"""

import heapq
import json
import logging
import shutil
import time
from array import array
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from bert.atomic import atomic_folder
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


def read_documents(files: list[Path]) -> Iterator[list[tuple[str, str]]]:
    """Chunks of (doc_id, text) in table order."""
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
            missing = {"doc_id", "text"} - set(parquet.schema_arrow.names)
            if missing:
                raise UserError(
                    f"{path}: missing column(s) {', '.join(sorted(missing))}; not a document table"
                )
            for batch in parquet.iter_batches(batch_size=CHUNK_DOCUMENTS, columns=["doc_id", "text"]):
                yield list(zip(batch.column("doc_id").to_pylist(), batch.column("text").to_pylist()))
        except (OSError, pa.ArrowInvalid) as error:
            raise UserError(f"{path}: cannot read this Parquet file ({error})") from None


_splitter: punkt.SentenceSplitter | None = None


def _init_worker(parameters_file: str | None) -> None:
    global _splitter
    parameters = (
        punkt.pretrained_parameters() if parameters_file is None else punkt.load_parameters(parameters_file)
    )
    _splitter = punkt.SentenceSplitter(parameters, curated=parameters_file is not None)


def _segment(chunk: list[tuple[str, str]], min_sentences: int) -> tuple[list[str], list[list[str]], int]:
    doc_ids, documents, dropped = [], [], 0
    for doc_id, text in chunk:
        sentences = _splitter.split(text or "")
        if len(sentences) < min_sentences:
            dropped += 1
        else:
            doc_ids.append(doc_id)
            documents.append(sentences)
    return doc_ids, documents, dropped


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
    def __init__(self, paths: list[Path]):
        self.paths = paths
        self.writers = [pq.ParquetWriter(p, SHARD_SCHEMA, compression="zstd") for p in paths]
        self.buffers: list[tuple[list, list]] = [([], []) for _ in paths]
        self.buffered = [0] * len(paths)
        self.documents = [0] * len(paths)
        self.sentences = [0] * len(paths)
        self.bytes = [0] * len(paths)

    def add(self, shard: int, doc_id: str, sentences: list[str], size: int) -> None:
        ids, docs = self.buffers[shard]
        ids.append(doc_id)
        docs.append(sentences)
        self.buffered[shard] += size
        self.documents[shard] += 1
        self.sentences[shard] += len(sentences)
        self.bytes[shard] += size
        if self.buffered[shard] >= ROW_GROUP_BYTES:
            self._flush(shard)

    def _flush(self, shard: int) -> None:
        ids, docs = self.buffers[shard]
        if ids:
            self.writers[shard].write_table(pa.table({"doc_id": ids, "sentences": docs}, schema=SHARD_SCHEMA))
        self.buffers[shard] = ([], [])
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

        # Pass 1: segment in parallel, keep results in input order, record document sizes.
        sizes, chunk_of, row_of = array("q"), array("l"), array("l")
        dropped = sentences_total = 0
        chunks = ((chunk, min_sentences) for chunk in read_documents(files))
        with (
            Workers(compute, _init_worker, (parameters_file,)) as pool,
            tqdm(desc="segment", unit=" docs", leave=False) as progress,
        ):
            results = pool.map(
                _segment,
                chunks,
                describe=lambda task: f"documents {task[0][0][0]} to {task[0][-1][0]} of {documents_dir}",
            )
            for chunk_index, (doc_ids, documents, chunk_dropped) in enumerate(results):
                progress.update(len(doc_ids) + chunk_dropped)
                dropped += chunk_dropped
                pq.write_table(
                    pa.table({"doc_id": doc_ids, "sentences": documents}, schema=SHARD_SCHEMA),
                    chunk_dir / f"chunk-{chunk_index:06d}.parquet",
                )
                for row, sentences in enumerate(documents):
                    sizes.append(sum(len(s.encode("utf-8")) for s in sentences))
                    chunk_of.append(chunk_index)
                    row_of.append(row)
                    sentences_total += len(sentences)
        segment_seconds = time.perf_counter() - start - punkt_seconds
        if not sizes:
            raise UserError(
                f"{documents_dir}: no document has at least {min_sentences} sentences ({dropped} dropped); "
                "the corpus is empty or shard.min_sentences is too high"
            )

        # Pass 2: split, pack by size, write the shards.
        size_array = np.frombuffer(sizes, dtype=np.int64)
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
        document = 0
        for chunk_file in tqdm(sorted(chunk_dir.iterdir()), desc="write shards", unit=" chunks", leave=False):
            table = pq.read_table(chunk_file)
            for doc_id, sentences in zip(
                table.column("doc_id").to_pylist(), table.column("sentences").to_pylist()
            ):
                writers.add(int(shard_of[document]), doc_id, sentences, int(size_array[document]))
                document += 1
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
