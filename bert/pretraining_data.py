"""BERT pretraining instances: sentence pairs for next-sentence prediction, masked for the masked LM.

The semantics are Google's `create_pretraining_data.py` (also NVIDIA's copy of it):
- a document is a list of sentences; sentences are packed into a chunk until it reaches a target
  length (max_seq_length - 3, or with probability short_seq_prob a random shorter one, drawn once
  per document and pass); the chunk is split at a random sentence into segment A and segment B;
- with probability 1/2 (always when the chunk is a single sentence) B is replaced by a random span
  of another document ("random next", label 1), and the sentences of the chunk not used by A are
  put back for the next instance;
- the pair is truncated to max_seq_length - 3 tokens, one token at a time from the longer segment,
  from the front or the back at random; then `[CLS] A [SEP] B [SEP]` and masked LM (bert.masking);
- all of this dupe_factor times over the documents, with different random choices each pass.

What differs is the machinery, for speed: sentences are tokenised in batches (with a word cache,
see bert.tokenization.SentenceEncoder) into one flat int32 array, so a segment is just a (start,
length) span of that array; pair building is a small Python loop over sentence lengths; the
instance matrices and the masks are built with NumPy for thousands of instances at once; HDF5 is
written in chunks with a fast compressor. Each input shard is an independent task seeded from
(seed, shard index), so outputs do not depend on the number of worker processes.

Output layout (NVIDIA's run_pretraining.py keys): input_ids int32 [N, S], input_mask int8 [N, S],
segment_ids int8 [N, S], masked_lm_positions int32 [N, P], masked_lm_ids int32 [N, P],
next_sentence_labels int8 [N]; unused masked slots are 0.
"""

import argparse
import glob
import hashlib
import io
import logging
import multiprocessing
import os
import random
import sys
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

import h5py
import numpy as np

from bert.errors import UserError
from bert.masking import mask_batch

log = logging.getLogger(__name__)

# (name, dtype, second dimension: "seq", "pred" or None)
LAYOUT = (
    ("input_ids", np.int32, "seq"),
    ("input_mask", np.int8, "seq"),
    ("segment_ids", np.int8, "seq"),
    ("masked_lm_positions", np.int32, "pred"),
    ("masked_lm_ids", np.int32, "pred"),
    ("next_sentence_labels", np.int8, None),
)
# HDF5 filters per dtype, chosen for write speed (writing was the costliest step), all built into
# every HDF5 library, so plain f[key][:] reads them anywhere. Measured on 27k instances of 128:
# - int32 (token ids, positions): scale-offset with scaleoffset=0 packs each chunk's values into
#   the fewest bits that hold them exactly (15 for ids < 32768): input_ids 29 ms, 6.6 MB; lzf +
#   shuffle 86 ms, 5.9 MB; gzip-1 212 ms, 5.7 MB; none 8 ms, 14.2 MB.
# - int8 (masks, segment ids, labels; long runs of 0 and 1): gzip level 1: input_mask 9 ms,
#   0.06 MB; lzf 10 ms, 0.09 MB; scale-offset 19 ms, 0.45 MB.
# All datasets: 58 ms, 8.4 MB, where lzf + shuffle takes 150 ms for 7.8 MB.
HDF5_FILTERS = {np.int32: {"scaleoffset": 0}, np.int8: {"compression": "gzip", "compression_opts": 1}}
ROWS_PER_HDF5_CHUNK = 1024
TOKENS_PER_BATCH = 1_000_000  # documents are turned into instances this many tokens at a time


@dataclass(frozen=True)
class ExampleConfig:
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 5
    whole_word_mask: bool = False
    dynamic_masking: bool = False  # store unmasked pairs; the loader masks them each epoch

    def __post_init__(self):
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length must be >= 8, not {self.max_seq_length}")
        if not 0 < self.max_predictions_per_seq <= self.max_seq_length:
            raise ValueError("max_predictions_per_seq must be in [1, max_seq_length]")
        if not 0 < self.masked_lm_prob < 1:
            raise ValueError("masked_lm_prob must be in (0, 1)")
        if not 0 <= self.short_seq_prob <= 1:
            raise ValueError("short_seq_prob must be in [0, 1]")
        if self.dupe_factor < 1:
            raise ValueError("dupe_factor must be >= 1")


@dataclass
class ShardStats:
    documents: int = 0
    sentences: int = 0
    text_bytes: int = 0
    instances: int = 0
    tokens: int = 0  # real tokens of all instances, [CLS]/[SEP] included
    random_next: int = 0
    per_input: dict[str, int] = field(default_factory=dict)

    def add(self, other: "ShardStats") -> None:
        for name in ("documents", "sentences", "text_bytes", "instances", "tokens", "random_next"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name, count in other.per_input.items():
            self.per_input[name] = self.per_input.get(name, 0) + count


# ---------------------------------------------------------------------------------------------
# Reading documents


def iter_documents(path: str | Path, batch_size: int = 1000) -> Iterator[list[list[str]]]:
    """Documents of a shard, `batch_size` at a time, each a list of sentences.

    `.parquet`: our sentence shards (column `sentences`, list<string>). Anything else: the
    reference text format, one sentence per line and a blank line between documents."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: input file not found")
    if path.suffix == ".parquet":
        yield from _iter_parquet(path, batch_size)
    else:
        yield from _iter_text(path, batch_size)


def _iter_parquet(path: Path, batch_size: int) -> Iterator[list[list[str]]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a damaged file
        raise UserError(f"{path}: not a readable Parquet file ({error}); re-run the `shard` stage") from None
    if "sentences" not in parquet.schema_arrow.names:
        raise UserError(f"{path}: has no `sentences` column; expected a sentence shard (doc_id, sentences)")
    for batch in parquet.iter_batches(batch_size=batch_size, columns=["sentences"]):
        yield [sentences or [] for sentences in batch.column(0).to_pylist()]


def _iter_text(path: Path, batch_size: int) -> Iterator[list[list[str]]]:
    documents: list[list[str]] = [[]]
    with open(path, "rb") as file:
        for line_number, raw in enumerate(file, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                raise UserError(f"{path}:{line_number}: not UTF-8 text; convert the file to UTF-8") from None
            if line:
                documents[-1].append(line)
            elif documents[-1]:
                documents.append([])
                if len(documents) > batch_size:
                    yield documents[:-1]
                    documents = [[]]
    yield [document for document in documents if document]


# ---------------------------------------------------------------------------------------------
# Tokenised documents: one flat array of token ids


@dataclass
class TokenizedDocuments:
    ids: np.ndarray  # int32 [total tokens]
    sentence_starts: np.ndarray  # int64 [num sentences + 1], offsets into ids
    document_starts: np.ndarray  # int64 [num documents + 1], offsets into sentences
    identity: np.ndarray  # int64 [num documents]; copies of one document share it

    @property
    def num_documents(self) -> int:
        return len(self.document_starts) - 1


def tokenize_documents(encoder, batches: Iterable[tuple[list[list[str]], list[int]]], stats: ShardStats):
    """Tokenise (documents, identities) batches into one TokenizedDocuments; sentences without
    tokens and documents without sentences are dropped, as in the reference."""
    id_parts, sentence_lengths, document_sizes, identities = [], [], [], []
    for documents, identity in batches:
        sentences = [sentence for document in documents for sentence in document]
        stats.text_bytes += len("".join(sentences).encode("utf-8"))
        ids, lengths = encoder.encode(sentences)
        id_parts.append(ids)
        nonempty = lengths > 0
        sentence_lengths.append(lengths[nonempty])
        document_of_sentence = np.repeat(np.arange(len(documents)), [len(document) for document in documents])
        sizes = np.bincount(document_of_sentence[nonempty], minlength=len(documents))
        keep = sizes > 0
        document_sizes.append(sizes[keep])
        identities.append(np.asarray(identity, dtype=np.int64)[keep])
    lengths = np.concatenate(sentence_lengths) if sentence_lengths else np.zeros(0, np.int64)
    sizes = np.concatenate(document_sizes) if document_sizes else np.zeros(0, np.int64)
    stats.documents += len(sizes)
    stats.sentences += len(lengths)
    return TokenizedDocuments(
        ids=np.concatenate(id_parts) if id_parts else np.zeros(0, np.int32),
        sentence_starts=np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]),
        document_starts=np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]),
        identity=np.concatenate(identities) if identities else np.zeros(0, np.int64),
    )


# ---------------------------------------------------------------------------------------------
# Sentence pairs


def truncation(length_a, length_b, max_num_tokens: int):
    """How many tokens the reference's truncate_seq_pair removes from A and from B (ints or arrays):
    one at a time from the longer segment (from B on a tie), until the pair fits."""
    excess = np.maximum(np.asarray(length_a) + length_b - max_num_tokens, 0)
    # first even out the longer segment, then alternate (B first on a tie)
    first = np.minimum(excess, np.abs(np.asarray(length_a) - length_b))
    rest = excess - first
    a_longer = np.asarray(length_a) > length_b
    cut_a = rest // 2 + np.where(a_longer, first, 0)
    cut_b = (rest + 1) // 2 + np.where(a_longer, 0, first)
    return cut_a, cut_b


def create_pairs(
    docs: TokenizedDocuments, document_indices: Iterable[int], config: ExampleConfig, rng: random.Random
) -> np.ndarray:
    """Segment pairs for the given documents (one pass), Google's algorithm over sentence lengths.

    Returns int64 [num pairs, 5]: start and length of A and of B in docs.ids, and the next-sentence
    label (1 = B is a random next segment from another document)."""
    max_num_tokens = config.max_seq_length - 3
    # Python lists and ints: this loop runs once per pair, where NumPy scalars would be slower
    starts = docs.sentence_starts.tolist()
    document_starts = docs.document_starts.tolist()
    identity = docs.identity.tolist()
    num_documents = docs.num_documents
    if num_documents < 2:
        raise ValueError("need at least two documents to draw random next segments from")
    uniform = rng.random
    short_seq_prob = config.short_seq_prob
    pairs = []
    append = pairs.append
    for document in document_indices:
        first_sentence, end_sentence = document_starts[document], document_starts[document + 1]
        target = max_num_tokens
        if uniform() < short_seq_prob:
            target = 2 + int(uniform() * (max_num_tokens - 1))  # randint(2, max_num_tokens)
        chunk_first = first_sentence
        while chunk_first < end_sentence:
            # Google adds sentences to the chunk until it holds `target` tokens or the document
            # ends; sentence ends are sorted offsets, so bisect finds that sentence directly.
            chunk_end = bisect_left(starts, starts[chunk_first] + target, chunk_first + 1, end_sentence)
            num_in_chunk = chunk_end - chunk_first
            a_end = chunk_first + 1
            if num_in_chunk >= 2:
                a_end += int(uniform() * (num_in_chunk - 1))  # randint(1, num_in_chunk - 1)
            start_a = starts[chunk_first]
            length_a = starts[a_end] - start_a
            if num_in_chunk == 1 or uniform() < 0.5:
                label = 1
                for _ in range(10):
                    other = int(uniform() * (num_documents - 1))
                    other += other >= document  # never the document itself
                    if identity[other] != identity[document]:
                        break
                other_first, other_end = document_starts[other], document_starts[other + 1]
                j = other_first + int(uniform() * (other_end - other_first))
                start_b = starts[j]
                # sentences from j on until B holds target - length_a tokens or the document ends
                b_end = bisect_left(starts, start_b + target - length_a, j + 1, other_end)
                length_b = starts[b_end] - start_b
                chunk_first = a_end  # put the unused sentences back
            else:
                label = 0
                start_b = starts[a_end]
                length_b = starts[chunk_end] - start_b
                chunk_first = chunk_end
            append((start_a, length_a, start_b, length_b, label))
    pairs = np.array(pairs, dtype=np.int64).reshape(-1, 5)
    truncate(pairs, max_num_tokens, np.random.default_rng(rng.getrandbits(128)))
    return pairs


def truncate(pairs: np.ndarray, max_num_tokens: int, rng: np.random.Generator) -> None:
    """Google's truncate_seq_pair for all pairs at once, in place: tokens are removed one at a time
    from the longer segment, each from the front or the back with probability 1/2, so the number
    taken from the front of a segment is Binomial(removed, 1/2)."""
    start_a, length_a, start_b, length_b = pairs[:, 0], pairs[:, 1], pairs[:, 2], pairs[:, 3]
    cut_a, cut_b = truncation(length_a, length_b, max_num_tokens)
    start_a += rng.binomial(cut_a, 0.5)
    start_b += rng.binomial(cut_b, 0.5)
    length_a -= cut_a
    length_b -= cut_b


@dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    mask: int
    vocab_size: int

    @classmethod
    def of(cls, tokenizer) -> "SpecialIds":
        return cls(
            tokenizer.token_to_id("[CLS]"),
            tokenizer.token_to_id("[SEP]"),
            tokenizer.token_to_id("[MASK]"),
            tokenizer.get_vocab_size(),
        )


def with_special_tokens(ids: np.ndarray, special: SpecialIds) -> np.ndarray:
    """docs.ids followed by [CLS], [SEP] and padding (0, as Google pads), for assemble()."""
    return np.concatenate([ids, np.array([special.cls, special.sep, 0], dtype=ids.dtype)])


def assemble(ids: np.ndarray, pairs: np.ndarray, max_seq_length: int) -> dict[str, np.ndarray]:
    """`[CLS] A [SEP] B [SEP]` + padding for every pair at once: input_ids, input_mask,
    segment_ids, next_sentence_labels, and `candidate` (the maskable positions).

    `ids` ends with [CLS], [SEP] and padding (with_special_tokens), so every position of every
    instance is a single index into it and input_ids is one gather."""
    cls_index, sep_index, pad_index = len(ids) - 3, len(ids) - 2, len(ids) - 1
    index_type = np.int32 if len(ids) < 2**31 else np.int64  # half the memory traffic of int64
    start_a, length_a, start_b, length_b = (pairs[:, k : k + 1].astype(index_type) for k in range(4))
    position = np.arange(max_seq_length, dtype=index_type)[None, :]
    b_first = length_a + 2  # position of B's first token
    real_length = b_first + length_b + 1
    source = np.where(position < b_first, start_a - 1, start_b - b_first)
    source += position
    rows = np.arange(len(pairs))
    source[:, 0] = cls_index
    source[rows, b_first[:, 0] - 1] = sep_index
    source[rows, real_length[:, 0] - 1] = sep_index
    input_mask = position < real_length
    source[~input_mask] = pad_index
    return {
        "input_ids": ids[source],
        "input_mask": input_mask.view(np.int8),
        "segment_ids": ((position >= b_first) & input_mask).view(np.int8),
        "next_sentence_labels": pairs[:, 4].astype(np.int8),
        "candidate": source < cls_index,
    }


# ---------------------------------------------------------------------------------------------
# HDF5


class ShardWriter:
    """Appends batches of instances to an HDF5 file in the layout above; written under a temporary
    name and renamed into place on a clean close, removed on an error. `compressed=False` is for
    intermediate files that are copied into compressed ones: one compression instead of two."""

    def __init__(
        self,
        path: str | Path,
        max_seq_length: int,
        max_predictions: int,
        attrs: dict,
        compressed: bool = True,
    ):
        self.path = Path(path)
        self.temporary = self.path.with_name(self.path.name + ".tmp")
        self.raw = WriteFailureLatch(self.temporary)
        self.file = h5py.File(self.raw, "w")
        self.rows = 0
        widths = {"seq": max_seq_length, "pred": max_predictions, None: None}
        for name, dtype, width in LAYOUT:
            shape = (0,) if widths[width] is None else (0, widths[width])
            self.file.create_dataset(
                name,
                shape=shape,
                maxshape=(None,) + shape[1:],
                chunks=(ROWS_PER_HDF5_CHUNK,) + shape[1:],
                dtype=dtype,
                track_times=False,
                **(HDF5_FILTERS[dtype] if compressed else {}),
            )
        for key, value in sorted(attrs.items()):
            self.file.attrs[key] = value

    def append(self, batch: dict[str, np.ndarray]) -> None:
        count = len(batch["input_ids"])
        for name, dtype, _ in LAYOUT:
            dataset = self.file[name]
            dataset.resize(self.rows + count, axis=0)
            dataset[self.rows :] = batch[name].astype(dtype, copy=False)
        self.rows += count
        self.raw.raise_failure()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            self.file.close()
            self.raw.close()
            self.raw.raise_failure()  # a write that failed while closing (the last chunks)
            if kind is None:
                os.replace(self.temporary, self.path)
        finally:
            self.temporary.unlink(missing_ok=True)  # gone already after a clean close


class WriteFailureLatch(io.FileIO):
    """A binary file for h5py's file-object driver that remembers its first failed write (disk
    full, file size limit) instead of raising it into HDF5, and drops the writes after it.

    Why: HDF5 (h5py 3.x, HDF5 1.14/2.0) crashes the process with SIGSEGV when it closes a file
    whose writes failed, so a full disk killed the examples stage without a word. Here HDF5 never
    sees a failure; ShardWriter raises the remembered OSError itself (after each append and after
    closing) and removes the partial file, which is garbage anyway."""

    failure: OSError | None = None

    def __init__(self, path: Path):
        super().__init__(path, "w+")

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        while view and self.failure is None:
            try:
                view = view[super().write(view) :]  # a raw write may be short: write the rest
            except OSError as error:
                self.failure = error
        return size

    def truncate(self, size: int | None = None) -> int:
        if self.failure is None:
            try:
                return super().truncate(size)
            except OSError as error:
                self.failure = error
        return self.tell() if size is None else size

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def read_shard(path: str | Path) -> dict[str, np.ndarray]:
    """All datasets of a shard as arrays (for tests and tools; the trainer streams)."""
    with h5py.File(path, "r") as file:
        return {name: file[name][:] for name, _, _ in LAYOUT}


def shard_attrs(config: ExampleConfig) -> dict:
    """File attributes that tell a loader how the shard was masked (and how to mask it, if dynamic)."""
    return {
        "masking": "dynamic" if config.dynamic_masking else "static",
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "masked_lm_prob": config.masked_lm_prob,
        "whole_word_mask": config.whole_word_mask,
    }


def copy_instances(
    sources: list[tuple[str | Path, int, int]], output: str | Path, permutation_seed=None
) -> int:
    """Write rows [start, stop) of each source shard, in order, into one shard at `output`; with
    `permutation_seed` the rows are shuffled (in memory: the output shard is loaded whole)."""
    with h5py.File(sources[0][0], "r") as first:
        attrs = dict(first.attrs)
        max_seq_length, max_predictions = first["input_ids"].shape[1], first["masked_lm_ids"].shape[1]
    with ShardWriter(output, max_seq_length, max_predictions, attrs) as writer:
        if permutation_seed is None:
            for path, start, stop in sources:
                with h5py.File(path, "r") as file:
                    for begin in range(start, stop, 64 * ROWS_PER_HDF5_CHUNK):
                        end = min(stop, begin + 64 * ROWS_PER_HDF5_CHUNK)
                        writer.append({name: file[name][begin:end] for name, _, _ in LAYOUT})
        else:
            parts = []
            for path, start, stop in sources:
                with h5py.File(path, "r") as file:
                    parts.append({name: file[name][start:stop] for name, _, _ in LAYOUT})
            merged = {name: np.concatenate([part[name] for part in parts]) for name, _, _ in LAYOUT}
            order = np.random.default_rng(permutation_seed).permutation(len(merged["input_ids"]))
            for begin in range(0, len(order), 64 * ROWS_PER_HDF5_CHUNK):
                rows = order[begin : begin + 64 * ROWS_PER_HDF5_CHUNK]
                writer.append({name: array[rows] for name, array in merged.items()})
        return writer.rows


# ---------------------------------------------------------------------------------------------
# One shard of instances


_TOKENIZERS: dict = {}  # one per worker process: the word cache then serves all of its shards


def _tokenizer_for(vocab_file: str, lower_case: bool, whole_word_mask: bool):
    """(SentenceEncoder, SpecialIds, `##` table for whole-word masking or None)."""
    from bert.tokenization import SentenceEncoder, continuation_table, load_tokenizer

    key = (str(vocab_file), lower_case)
    if key not in _TOKENIZERS:
        tokenizer = load_tokenizer(vocab_file, lower_case)
        _TOKENIZERS[key] = [SentenceEncoder(tokenizer), SpecialIds.of(tokenizer), None]
    encoder, special, continuation = _TOKENIZERS[key]
    if whole_word_mask and continuation is None:  # 60 ms: only when needed
        continuation = _TOKENIZERS[key][2] = continuation_table(encoder.tokenizer)
    return encoder, special, continuation


def write_instances(
    batches: Iterable[tuple[list[list[str]], list[int]]],
    output: str | Path,
    vocab_file: str | Path,
    lower_case: bool,
    config: ExampleConfig,
    seed: Iterable[int],
    compressed: bool = True,
) -> ShardStats:
    """Tokenise the documents of one shard, make dupe_factor passes of instances over them, mask
    and write them to the HDF5 file `output`. `batches` yields (documents, identities); `seed` is
    a sequence of ints (the run's seed and the shard's index) that fixes every random choice.
    `compressed=False`: for a temporary file that copy_instances will copy (see ShardWriter)."""
    encoder, special, continuation = _tokenizer_for(str(vocab_file), lower_case, config.whole_word_mask)
    stats = ShardStats()
    docs = tokenize_documents(encoder, batches, stats)
    seed = [int(part) for part in seed]
    pair_rng = random.Random(f"pairs {seed}")  # str seeds go through sha512: stable across runs
    mask_rng = np.random.default_rng([*seed, 0])
    order_rng = np.random.default_rng([*seed, 1])
    document_tokens = np.diff(docs.sentence_starts[docs.document_starts])
    with ShardWriter(
        output, config.max_seq_length, config.max_predictions_per_seq, shard_attrs(config), compressed
    ) as writer:
        if docs.num_documents == 0:
            return stats
        if docs.num_documents == 1:
            raise UserError(
                f"{output}: only one document for this shard, and random next segments need another one; "
                "give more text or fewer output shards"
            )
        ids = with_special_tokens(docs.ids, special)
        for _ in range(config.dupe_factor):
            order = order_rng.permutation(docs.num_documents)
            # batches of documents holding about TOKENS_PER_BATCH tokens
            cuts = np.searchsorted(
                np.cumsum(document_tokens[order]),
                np.arange(TOKENS_PER_BATCH, document_tokens.sum(), TOKENS_PER_BATCH),
            )
            for group in np.split(order, cuts):
                pairs = create_pairs(docs, group.tolist(), config, pair_rng)
                if len(pairs):
                    writer.append(_make_batch(ids, pairs, config, special, continuation, mask_rng))
                    stats.instances += len(pairs)
                    stats.tokens += int((pairs[:, 1] + pairs[:, 3] + 3).sum())
                    stats.random_next += int(pairs[:, 4].sum())
    return stats


def _make_batch(
    ids, pairs, config: ExampleConfig, special: SpecialIds, continuation, rng
) -> dict[str, np.ndarray]:
    batch = assemble(ids, pairs, config.max_seq_length)
    candidate = batch.pop("candidate")
    if config.dynamic_masking:
        batch["masked_lm_positions"] = np.zeros((len(pairs), config.max_predictions_per_seq), np.int32)
        batch["masked_lm_ids"] = np.zeros((len(pairs), config.max_predictions_per_seq), np.int32)
        return batch
    word_start = ~continuation[batch["input_ids"]] if config.whole_word_mask else None
    batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"] = mask_batch(
        batch["input_ids"],
        candidate,
        word_start,
        config.masked_lm_prob,
        config.max_predictions_per_seq,
        special.vocab_size,
        special.mask,
        rng,
    )
    return batch


def iter_sentences(paths: Iterable[str | Path]) -> Iterator[str]:
    """Every sentence of the given shards, in order (for vocabulary training)."""
    for path in paths:
        for documents in iter_documents(path):
            for document in documents:
                yield from document


def file_batches(path: str | Path, identity_base: int = 0):
    """(documents, identities) batches of one input file, for write_instances."""
    row = identity_base
    for documents in iter_documents(path):
        yield documents, list(range(row, row + len(documents)))
        row += len(documents)


# ---------------------------------------------------------------------------------------------
# Parallel runs: one task per output shard, results in task order


def run_tasks(function, tasks: list, num_workers: int, description: str) -> list:
    """function(*task) for each task on `num_workers` processes; results in task order."""
    from tqdm import tqdm

    num_workers = max(1, min(num_workers, len(tasks)))
    # The bar is closed before an error leaves (`with`), so the error stays the last line printed.
    with (
        tqdm(total=len(tasks), desc=description, unit="shard", disable=len(tasks) < 2) as bar,
        ExitStack() as stack,
    ):
        if num_workers == 1:
            results = (function(*task) for task in tasks)
        else:
            context = multiprocessing.get_context("fork")
            pool = stack.enter_context(context.Pool(num_workers, initializer=_single_threaded_worker))
            results = pool.imap(_call, [(function, task) for task in tasks])
        done = []
        for result in results:
            done.append(result)
            bar.update()
        return done


def _single_threaded_worker() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per core already


def _call(item):
    function, task = item
    return function(*task)


def vocab_sha256(vocab_file: str | Path) -> str:
    return hashlib.sha256(Path(vocab_file).read_bytes()).hexdigest()


def config_dict(config: ExampleConfig) -> dict:
    return asdict(config)


# ---------------------------------------------------------------------------------------------
# Command line: bring your own text


def _file_task(
    path: str, output: str, vocab: str, lower_case: bool, config: ExampleConfig, seed: int, index: int
):
    # a part of the output, copied into it at the end: written uncompressed
    stats = write_instances(
        file_batches(path), output, vocab, lower_case, config, (seed, index), compressed=False
    )
    stats.per_input[path] = stats.instances
    return stats


def create_from_files(
    inputs: list[str],
    output: str | Path,
    vocab: str | Path,
    lower_case: bool,
    config: ExampleConfig,
    seed: int,
    num_workers: int,
) -> ShardStats:
    """Instances from each input file (random next segments come from the same file), all
    written to one HDF5 file in input order."""
    output = Path(output)
    if len(inputs) == 1:  # no parts to join: write the output directly
        stats = write_instances(file_batches(inputs[0]), output, vocab, lower_case, config, (seed, 0))
        stats.per_input[str(inputs[0])] = stats.instances
        return stats
    parts = [str(output.with_name(f"{output.name}.part{index:05d}")) for index in range(len(inputs))]
    tasks = [
        (path, part, str(vocab), lower_case, config, seed, index)
        for index, (path, part) in enumerate(zip(inputs, parts))
    ]
    try:
        results = run_tasks(_file_task, tasks, num_workers, "inputs")
        total = ShardStats()
        for stats in results:
            total.add(stats)
        sources = []
        for part in parts:
            with h5py.File(part, "r") as file:
                sources.append((part, 0, len(file["input_ids"])))
        copy_instances(sources, output)
        return total
    finally:
        for part in parts:
            Path(part).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bert.pretraining_data",
        description="Create BERT pretraining instances (HDF5, NVIDIA layout) from text or sentence shards.",
    )
    parser.add_argument(
        "--input",
        required=True,
        help="file or glob: .parquet sentence shards, or text "
        "(one sentence per line, blank line between documents)",
    )
    parser.add_argument("--vocab", required=True, help="vocab.txt")
    parser.add_argument("--output", required=True, help="output .hdf5 file")
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--max-predictions-per-seq", type=int, default=20)
    parser.add_argument("--masked-lm-prob", type=float, default=0.15)
    parser.add_argument("--dupe-factor", type=int, default=5)
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--do-lower-case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--whole-word-mask", action="store_true")
    parser.add_argument(
        "--dynamic-masking", action="store_true", help="store unmasked pairs (the loader masks)"
    )
    parser.add_argument("--num-workers", type=int, default=0, help="processes; 0 = all CPU cores")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        inputs = sorted(glob.glob(args.input)) if glob.has_magic(args.input) else [args.input]
        if not inputs:
            raise UserError(f"{args.input}: no input file matches")
        try:
            config = ExampleConfig(
                max_seq_length=args.max_seq_length,
                max_predictions_per_seq=args.max_predictions_per_seq,
                masked_lm_prob=args.masked_lm_prob,
                short_seq_prob=args.short_seq_prob,
                dupe_factor=args.dupe_factor,
                whole_word_mask=args.whole_word_mask,
                dynamic_masking=args.dynamic_masking,
            )
        except ValueError as error:
            raise UserError(f"bad option: {error}") from None
        workers = args.num_workers or os.cpu_count() or 1
        stats = create_from_files(
            inputs, args.output, args.vocab, args.do_lower_case, config, args.seed, workers
        )
        log.info(
            "%s: %d instances, %d tokens from %d documents",
            args.output,
            stats.instances,
            stats.tokens,
            stats.documents,
        )
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
