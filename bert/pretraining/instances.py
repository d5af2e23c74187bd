"""BERT pretraining instances: sentence pairs for next-sentence prediction, masked for the masked LM
(or, MLM only, packed full sentences: `create_packed` below).

The semantics are Google's `create_pretraining_data.py` (also NVIDIA's copy of it):
- a document is a list of sentences; sentences are packed into a chunk until it reaches a target
  length (max_seq_length - 3, or with probability short_seq_prob a random shorter one, drawn once
  per document and pass); the chunk is split at a random sentence into segment A and segment B;
- with probability 1/2 (always when the chunk is a single sentence) B is replaced by a random span
  of another document ("random next", label 1), and the sentences of the chunk not used by A are
  put back for the next instance;
- the pair is truncated to max_seq_length - 3 tokens, one token at a time from the longer segment,
  from the front or the back at random; then `[CLS] A [SEP] B [SEP]` and masked LM (bert.pretraining.masking);
- all of this dupe_factor times over the documents, with different random choices each pass.

With `next_sentence=False` (MLM only, RoBERTa's FULL-SENTENCES) there are no pairs: see create_packed.

What differs is the machinery, for speed: sentences are tokenised in batches (with a word cache,
see bert.text.tokenization.SentenceEncoder) into one flat int32 array, so a segment is just a (start,
length) span of that array; pair building is a small Python loop over sentence lengths; the
instance matrices and the masks are built with NumPy for thousands of instances at once. Each
input shard is an independent task seeded from (seed, shard index), so outputs do not depend on
the number of worker processes.

Input: sentence shards or text (bert.corpus.sentence_shards). Output: HDF5 files in NVIDIA's
layout (bert.pretraining.hdf5).
"""

import argparse
import dataclasses
import glob
import logging
import os
import random
import typing
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import h5py
import numpy as np

from bert.atomic import atomic_file
from bert.corpus.sentence_shards import iter_documents
from bert.errors import SettingsError, UserError, run_main
from bert.parallel import run_tasks
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.hdf5 import ShardWriter, copy_instances, shard_attrs
from bert.pretraining.masking import mask_batch
from bert.text.tokenization import SentenceEncoder, TokenLayout, load_tokenizer

log = logging.getLogger(__name__)

TOKENS_PER_BATCH = 1_000_000  # documents are turned into instances this many tokens at a time


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
# Tokenised documents: one flat array of token ids


@dataclass
class TokenizedDocuments:
    ids: np.ndarray  # int32 [total tokens]
    word_start: np.ndarray  # bool [total tokens]: the first piece of a word (whole-word masking)
    sentence_starts: np.ndarray  # int64 [num sentences + 1], offsets into ids
    document_starts: np.ndarray  # int64 [num documents + 1], offsets into sentences
    identity: np.ndarray  # int64 [num documents]; copies of one document share it

    @property
    def num_documents(self) -> int:
        return len(self.document_starts) - 1


def tokenize_documents(encoder, batches: Iterable[tuple[list[list[str]], list[int]]], stats: ShardStats):
    """Tokenise (documents, identities) batches into one TokenizedDocuments; sentences without
    tokens and documents without sentences are dropped, as in the reference."""
    id_parts, start_parts, sentence_lengths, document_sizes, identities = [], [], [], [], []
    for documents, identity in batches:
        sentences = [sentence for document in documents for sentence in document]
        stats.text_bytes += len("".join(sentences).encode("utf-8"))
        ids, lengths, word_start = encoder.encode(sentences)
        id_parts.append(ids)
        start_parts.append(word_start)
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
        word_start=np.concatenate(start_parts) if start_parts else np.zeros(0, bool),
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


SEPARATOR = -1  # a piece of create_packed that is the [SEP] between two documents


def create_packed(
    docs: TokenizedDocuments, document_indices: Iterable[int], config: ExampleConfig
) -> np.ndarray:
    """MLM-only instances, RoBERTa's FULL-SENTENCES (Liu et al. 2019, section 4.2): the sentences
    of the given documents, in that order, packed whole into `[CLS] ... [SEP]` instances of at most
    max_seq_length tokens. A sentence goes to the next instance when it does not fit in this one;
    one longer than an instance on its own is cut into instance-sized pieces. At a document
    boundary the instance goes on with the next document after a [SEP] between the two (RoBERTa's
    "extra separator token"), so an instance may end one document and start the next; only the
    last instance of the list may be short. No random choices: dupe_factor passes differ by the
    order of the documents (and the masks). short_seq_prob is not used (RoBERTa has no short
    sequences).

    Returns int64 [num pieces, 3]: instance index (0, 1, ... in order), start in docs.ids (or
    SEPARATOR) and length of each piece, the pieces of an instance in order."""
    room = config.max_seq_length - 2  # [CLS] and the final [SEP]
    starts = docs.sentence_starts.tolist()
    document_starts = docs.document_starts.tolist()
    pieces = []
    instance, used = 0, 0  # the instance being filled and its tokens so far
    for document in document_indices:
        new_document = True
        for sentence in range(document_starts[document], document_starts[document + 1]):
            start, length = starts[sentence], starts[sentence + 1] - starts[sentence]
            while length:
                separator = 1 if new_document and used else 0
                take = min(length, room)
                if used + separator + take > room:  # does not fit: the next instance
                    instance, used, separator = instance + 1, 0, 0
                if separator:
                    pieces.append((instance, SEPARATOR, 1))
                pieces.append((instance, start, take))
                used += separator + take
                start, length, new_document = start + take, length - take, False
    return np.array(pieces, dtype=np.int64).reshape(-1, 3)


def assemble_packed(ids: np.ndarray, pieces: np.ndarray, max_seq_length: int) -> dict[str, np.ndarray]:
    """`[CLS] pieces [SEP]` + padding for every instance of create_packed at once: input_ids,
    input_mask, segment_ids (all 0: one segment), `candidate` and `source`, as assemble() makes them."""
    cls_index, sep_index, pad_index = len(ids) - 3, len(ids) - 2, len(ids) - 1
    instance, start, length = (
        pieces[:, 0],
        np.where(pieces[:, 1] == SEPARATOR, sep_index, pieces[:, 1]),
        pieces[:, 2],
    )
    num_instances = int(instance[-1]) + 1
    real_length = np.bincount(instance, weights=length, minlength=num_instances).astype(np.int64) + 2
    # each piece's first column: after [CLS] and the instance's earlier pieces
    piece_end = np.cumsum(length)
    instance_start = np.concatenate([[0], piece_end])[np.searchsorted(instance, np.arange(num_instances))]
    column = 1 + piece_end - length - instance_start[instance]
    # one entry per token of every piece: its row, column and index in ids
    token_piece = np.repeat(np.arange(len(pieces)), length)
    within = np.arange(len(token_piece)) - np.repeat(piece_end - length, length)
    source = np.full((num_instances, max_seq_length), pad_index, dtype=np.int64)
    source[:, 0] = cls_index
    source[instance[token_piece], column[token_piece] + within] = start[token_piece] + within
    source[np.arange(num_instances), real_length - 1] = sep_index
    input_mask = np.arange(max_seq_length)[None, :] < real_length[:, None]
    return {
        "input_ids": ids[source],
        "input_mask": input_mask.view(np.int8),
        "segment_ids": np.zeros((num_instances, max_seq_length), np.int8),
        "candidate": source < cls_index,
        "source": source,
    }


@dataclass(frozen=True)
class SpecialIds:
    """The tokenizer's special tokens as example creation uses them: one before each instance, one
    after each segment (and between packed documents), the type id of segment B and its [SEP]."""

    cls: int
    sep: int
    mask: int
    pad: int
    second_type: int
    replaceable: np.ndarray = field(compare=False)  # ids a masked position may be replaced by at random
    pairs: str = ""  # why the tokenizer's pair template is not `CLS A SEP B SEP`; "" when it is

    @classmethod
    def of(cls, tokenizer, source: str | Path = "the tokenizer") -> "SpecialIds":
        layout = TokenLayout.of(tokenizer, source)
        if len(layout.single_before) != 1 or len(layout.single_after) != 1:
            raise UserError(
                f"{source}: example creation puts one special token before and one after a text "
                "(`CLS A SEP`); this tokenizer's template puts more"
            )
        types = layout.pair_types
        pairs = ""
        if (layout.pair_before, layout.pair_between, layout.pair_after) != (
            layout.single_before,
            layout.single_after,
            layout.single_after,
        ) or (types[0], types[1], types[2], types[4]) != ((0,), 0, (0,), (types[3],)):
            pairs = (
                f"{source}: next-sentence pairs are laid out `CLS A SEP B SEP` (B and its SEP of one "
                "type id); this tokenizer's pair template differs: set examples.next_sentence: false"
            )
        return cls(layout.cls, layout.sep, layout.mask, layout.pad, types[3], layout.replaceable_ids(), pairs)


def with_special_tokens(ids: np.ndarray, special: SpecialIds) -> np.ndarray:
    """docs.ids followed by [CLS], [SEP] and padding ([PAD]: 0 in BERT's vocabularies, as Google
    pads), for assemble()."""
    return np.concatenate([ids, np.array([special.cls, special.sep, special.pad], dtype=ids.dtype)])


def assemble(
    ids: np.ndarray, pairs: np.ndarray, max_seq_length: int, second_type: int = 1
) -> dict[str, np.ndarray]:
    """`[CLS] A [SEP] B [SEP]` + padding for every pair at once: input_ids, input_mask,
    segment_ids (`second_type` for B and its [SEP]), next_sentence_labels, `candidate` (the
    maskable positions) and `source` (each position's index in `ids`).

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
        "segment_ids": ((position >= b_first) & input_mask).view(np.int8) * np.int8(second_type),
        "next_sentence_labels": pairs[:, 4].astype(np.int8),
        "candidate": source < cls_index,
        "source": source,
    }


# ---------------------------------------------------------------------------------------------
# One shard of instances


_TOKENIZERS: dict = {}  # one per worker process: the word cache then serves all of its shards


def _tokenizer_for(vocab_file: str, lower_case: bool):
    """(SentenceEncoder, SpecialIds) of a vocab.txt or tokenizer.json."""
    key = (str(vocab_file), lower_case)
    if key not in _TOKENIZERS:
        tokenizer = load_tokenizer(vocab_file, lower_case)
        _TOKENIZERS[key] = SentenceEncoder(tokenizer), SpecialIds.of(tokenizer, vocab_file)
    return _TOKENIZERS[key]


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
    `compressed=False`: for a temporary file that copy_instances will copy."""
    encoder, special = _tokenizer_for(str(vocab_file), lower_case)
    stats = ShardStats()
    docs = tokenize_documents(encoder, batches, stats)
    seed = [int(part) for part in seed]
    pair_rng = random.Random(f"pairs {seed}")  # str seeds go through sha512: stable across runs
    mask_rng = np.random.default_rng([*seed, 0])
    order_rng = np.random.default_rng([*seed, 1])
    document_tokens = np.diff(docs.sentence_starts[docs.document_starts])
    with ShardWriter(
        output,
        config.max_seq_length,
        config.max_predictions_per_seq,
        shard_attrs(config),
        compressed,
        next_sentence=config.next_sentence,
    ) as writer:
        if docs.num_documents == 0:
            return stats
        if config.next_sentence and special.pairs:
            raise UserError(special.pairs)
        if docs.num_documents == 1 and config.next_sentence:
            raise UserError(
                f"{output}: only one document for this shard, and random next segments need another one; "
                "give more text or fewer output shards"
            )
        ids = with_special_tokens(docs.ids, special)
        # the specials and padding count as word starts: they end the word before them
        word_start = np.concatenate([docs.word_start, np.ones(3, dtype=bool)])
        for _ in range(config.dupe_factor):
            order = order_rng.permutation(docs.num_documents)
            # batches of documents holding about TOKENS_PER_BATCH tokens
            cuts = np.searchsorted(
                np.cumsum(document_tokens[order]),
                np.arange(TOKENS_PER_BATCH, document_tokens.sum(), TOKENS_PER_BATCH),
            )
            for group in np.split(order, cuts):
                if not config.next_sentence:
                    pieces = create_packed(docs, group.tolist(), config)
                    if len(pieces):
                        batch = assemble_packed(ids, pieces, config.max_seq_length)
                        writer.append(_masked(batch, config, special, word_start, mask_rng))
                        stats.instances += len(batch["input_ids"])
                        stats.tokens += int(batch["input_mask"].sum(dtype=np.int64))
                    continue
                pairs = create_pairs(docs, group.tolist(), config, pair_rng)
                if len(pairs):
                    writer.append(_make_batch(ids, pairs, config, special, word_start, mask_rng))
                    stats.instances += len(pairs)
                    stats.tokens += int((pairs[:, 1] + pairs[:, 3] + 3).sum())
                    stats.random_next += int(pairs[:, 4].sum())
    return stats


def _make_batch(
    ids, pairs, config: ExampleConfig, special: SpecialIds, word_start, rng
) -> dict[str, np.ndarray]:
    batch = assemble(ids, pairs, config.max_seq_length, special.second_type)
    return _masked(batch, config, special, word_start, rng)


def _masked(batch, config: ExampleConfig, special: SpecialIds, word_start, rng) -> dict[str, np.ndarray]:
    """An assembled batch masked (or, for dynamic masking, with empty mask slots) and without
    `candidate` and `source`. word_start: bool per index of the ids the batch was assembled from."""
    candidate, source = batch.pop("candidate"), batch.pop("source")
    rows = len(batch["input_ids"])
    if config.dynamic_masking:
        batch["masked_lm_positions"] = np.zeros((rows, config.max_predictions_per_seq), np.int32)
        batch["masked_lm_ids"] = np.zeros((rows, config.max_predictions_per_seq), np.int32)
        return batch
    batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"] = mask_batch(
        batch["input_ids"],
        candidate,
        word_start[source] if config.whole_word_mask else None,
        config.masked_lm_prob,
        config.max_predictions_per_seq,
        special.replaceable,
        special.mask,
        rng,
    )
    return batch


def file_batches(path: str | Path, identity_base: int = 0):
    """(documents, identities) batches of one input file, for write_instances."""
    row = identity_base
    for documents in iter_documents(path):
        yield documents, list(range(row, row + len(documents)))
        row += len(documents)


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
    written to one HDF5 file in input order, complete or not at all (bert.atomic)."""
    output = Path(output)
    if len(inputs) == 1:  # no parts to join: write the output directly
        with atomic_file(output) as building:
            stats = write_instances(file_batches(inputs[0]), building, vocab, lower_case, config, (seed, 0))
        stats.per_input[str(inputs[0])] = stats.instances
        return stats
    parts = [str(output.with_name(f"{output.name}.part{index:05d}")) for index in range(len(inputs))]
    tasks = [
        (path, part, str(vocab), lower_case, config, seed, index)
        for index, (path, part) in enumerate(zip(inputs, parts))
    ]
    try:
        results = run_tasks(_file_task, tasks, num_workers, "inputs", describe=lambda task: task[0])
        total = ShardStats()
        for stats in results:
            total.add(stats)
        sources = []
        for part in parts:
            with h5py.File(part, "r") as file:
                sources.append((part, 0, len(file["input_ids"])))
        with atomic_file(output) as building:
            copy_instances(sources, building)
        return total
    finally:
        for part in parts:
            Path(part).unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bert.pretraining.instances",
        description="Create BERT pretraining instances (HDF5, NVIDIA layout) from text or sentence shards.",
    )
    parser.add_argument(
        "--input",
        required=True,
        help="file or glob: .parquet sentence shards, or text "
        "(one sentence per line, blank line between documents)",
    )
    parser.add_argument(
        "--vocab", required=True, help="vocab.txt (BERT's WordPiece) or tokenizer.json (any fast tokenizer)"
    )
    parser.add_argument("--output", required=True, help="output .hdf5 file")
    hints = typing.get_type_hints(ExampleConfig, include_extras=True)
    for setting in dataclasses.fields(ExampleConfig):  # an option for each setting, with its own default
        option, hint, default = "--" + setting.name.replace("_", "-"), hints[setting.name], setting.default
        if hint is bool:
            parser.add_argument(option, action=argparse.BooleanOptionalAction, default=default)
        elif typing.get_origin(hint) is Literal:
            parser.add_argument(option, choices=typing.get_args(hint), default=default)
        else:
            base, bounds = typing.get_args(hint)[:2]
            parser.add_argument(option, type=base, default=default, help=bounds.describe(base))
    parser.add_argument("--dynamic-masking", dest="masking", action="store_const", const="dynamic")
    parser.add_argument("--seed", type=int, default=12345)  # the reference tools' random_seed
    parser.add_argument("--do-lower-case", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--num-workers", type=int, default=0, help="processes; 0 = all CPU cores")
    args = parser.parse_args()
    inputs = sorted(glob.glob(args.input)) if glob.has_magic(args.input) else [args.input]
    if not inputs:
        raise UserError(f"{args.input}: no input file matches")
    try:
        config = ExampleConfig(
            **{setting.name: getattr(args, setting.name) for setting in dataclasses.fields(ExampleConfig)}
        )
    except SettingsError as error:
        raise UserError(f"bad option: {error.naming('')}") from None
    workers = args.num_workers or os.cpu_count() or 1
    stats = create_from_files(inputs, args.output, args.vocab, args.do_lower_case, config, args.seed, workers)
    log.info(
        "%s: %d instances, %d tokens from %d documents",
        args.output,
        stats.instances,
        stats.tokens,
        stats.documents,
    )


if __name__ == "__main__":
    run_main(main)
