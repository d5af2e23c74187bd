"""SQuAD examples as model inputs: question and context tokenised with the fast tokenizer, the
context cut into windows of `max_seq_length` tokens, `doc_stride` tokens apart, as
google-research/bert's run_squad.py does.

Every context token keeps its character span in the original context (the tokenizer's offsets
refer to the string before lower-casing and accent stripping), so an answer maps to tokens and
back without any approximate text alignment, and the span of the word it is a piece of, so a
predicted answer can be widened to whole words.
"""

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from bert.errors import UserError
from bert.squad.dataset import SquadExample
from bert.text.tokenization import TokenLayout

log = logging.getLogger(__name__)


@dataclass
class SquadFeatures:
    """One row per window: [CLS] question [SEP] context window [SEP] [PAD]... (BERT's pair
    template; any tokenizer's own, e.g. RoBERTa's `<s> question </s></s> window </s>`).

    `offsets[f, i]` is the (start, end) character span of token i in the context of example
    `example_index[f]`, and (-1, -1) for question, special and padding tokens.
    `word_offsets[f, i]` is the span of the whole word token i is a piece of: the tokenizer's
    pre-tokenized word, a run of characters that are neither whitespace nor punctuation, or one
    punctuation mark or CJK character ("Crusoe" for the "##uso" of cr ##uso ##e; "," alone).
    `start_positions`/`end_positions` are the answer's token positions in the window (first gold
    answer), 0 ([CLS]) when the window does not hold the whole answer or the question has none.
    Spans never start with whitespace (byte-level BPE keeps the space before a word in its piece).
    `token_is_max_context[f, i]` marks the one window in which each context token has the most
    context on both sides; predictions only start at such tokens (as run_squad.py does)."""

    input_ids: np.ndarray  # int32 [F, S]
    token_type_ids: np.ndarray  # int8 [F, S]
    attention_mask: np.ndarray  # int8 [F, S]
    start_positions: np.ndarray  # int32 [F]
    end_positions: np.ndarray  # int32 [F]
    example_index: np.ndarray  # int32 [F]
    offsets: np.ndarray  # int32 [F, S, 2]
    word_offsets: np.ndarray  # int32 [F, S, 2]
    token_is_max_context: np.ndarray  # bool [F, S]

    def __len__(self) -> int:
        return len(self.input_ids)

    def training_arrays(self) -> dict[str, np.ndarray]:
        """What the QA model trains on, by its argument names (bert.training.finetune.FineTuningBatches)."""
        names = ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions")
        return {name: getattr(self, name) for name in names}

    @classmethod
    def empty(cls, num_features: int, max_seq_length: int, pad_id: int) -> "SquadFeatures":
        """Arrays for `num_features` windows: all padding, no answer, offsets -1."""
        shape = (num_features, max_seq_length)
        return cls(
            input_ids=np.full(shape, pad_id, dtype=np.int32),
            token_type_ids=np.zeros(shape, dtype=np.int8),
            attention_mask=np.zeros(shape, dtype=np.int8),
            start_positions=np.zeros(num_features, dtype=np.int32),
            end_positions=np.zeros(num_features, dtype=np.int32),
            example_index=np.zeros(num_features, dtype=np.int32),
            offsets=np.full((*shape, 2), -1, dtype=np.int32),
            word_offsets=np.full((*shape, 2), -1, dtype=np.int32),
            token_is_max_context=np.zeros(shape, dtype=bool),
        )

    def select(self, rows) -> "SquadFeatures":
        """The windows at `rows` (a slice, indices or a mask), every array alike."""
        return SquadFeatures(*(getattr(self, field.name)[rows] for field in dataclasses.fields(self)))


def window_starts(num_tokens: int, window_length: int, doc_stride: int) -> list[int]:
    """First token of each context window: `doc_stride` apart until one reaches the end
    (run_squad.py's doc_spans; a stride longer than the window would skip tokens, so it is capped)."""
    step = min(doc_stride, window_length)
    starts = [0]
    while starts[-1] + window_length < num_tokens:
        starts.append(starts[-1] + step)
    return starts


def make_features(
    examples: list[SquadExample],
    tokenizer: Tokenizer,
    *,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    progress: bool = True,
) -> SquadFeatures:
    """Tokenise and window every example (see `SquadFeatures`). Questions are cut to
    `max_query_length` tokens; each distinct context is tokenised once. The tokenizer's pair template
    (TokenLayout) lays out each window, its special tokens and type ids."""
    layout = TokenLayout.of(tokenizer)
    num_special = len(layout.pair_before) + len(layout.pair_between) + len(layout.pair_after)  # BERT: 3
    if max_seq_length <= max_query_length + num_special:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must exceed max_query_length + {num_special} "
            f"({max_query_length + num_special})"
        )
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}")
    # A private copy: truncation or padding configured on the caller's tokenizer would cut contexts.
    tokenizer = Tokenizer.from_str(tokenizer.to_str())
    tokenizer.no_truncation()
    tokenizer.no_padding()

    context_index: dict[str, int] = {}
    for example in examples:
        context_index.setdefault(example.context, len(context_index))
    question_encodings = tokenizer.encode_batch([e.question for e in examples], add_special_tokens=False)
    context_ids, context_offsets, context_word_offsets = _tokenize_contexts(tokenizer, list(context_index))

    # First pass: the windows of every example, so the arrays are allocated once.
    plans = [
        _plan(
            example,
            question,
            context_index,
            context_ids,
            max_seq_length - num_special,
            max_query_length,
            doc_stride,
        )
        for example, question in zip(examples, question_encodings)
    ]
    num_features = sum(len(plan[3]) for plan in plans)
    features = SquadFeatures.empty(num_features, max_seq_length, layout.pad)

    unmappable = 0
    f = 0
    for i, (example, (ctx, question_ids, window_length, starts)) in enumerate(
        tqdm(zip(examples, plans), total=len(examples), desc="SQuAD features", unit="q", disable=not progress)
    ):
        ids, spans, word_spans = context_ids[ctx], context_offsets[ctx], context_word_offsets[ctx]
        answer_tokens = _answer_tokens(example, spans)
        unmappable += answer_tokens == ()
        context = (ids, spans, word_spans)
        f = _write_windows(
            features, f, i, layout, question_ids, context, window_length, starts, answer_tokens
        )
    if unmappable:
        log.warning(
            "%d answers cover no token of their context (whitespace or removed characters); "
            "their windows point at [CLS]",
            unmappable,
        )
    log.info(
        "SQuAD features: %d questions, %d contexts -> %d windows of %d tokens",
        len(examples),
        len(context_index),
        num_features,
        max_seq_length,
    )
    return features


def _write_windows(
    features, f, i, layout, question_ids, context, window_length, starts, answer_tokens
) -> int:
    """Write the windows of example i from row f on; returns the row after them. context: the
    context's (ids, spans, word spans); answer_tokens: as _answer_tokens gives them."""
    ids, spans, word_spans = context
    best_window = _max_context_windows(len(ids), window_length, starts)
    context_start = len(layout.pair_before) + len(question_ids) + len(layout.pair_between)
    for w, window_start in enumerate(starts):
        length = min(window_length, len(ids) - window_start)
        window = slice(window_start, window_start + length)
        placed = slice(context_start, context_start + length)
        pair_ids, pair_types = layout.pair(question_ids, ids[window])
        features.input_ids[f, : len(pair_ids)] = pair_ids
        features.token_type_ids[f, : len(pair_ids)] = pair_types
        features.attention_mask[f, : len(pair_ids)] = 1
        features.offsets[f, placed] = spans[window]
        features.word_offsets[f, placed] = word_spans[window]
        features.token_is_max_context[f, placed] = best_window[window] == w
        if answer_tokens and window_start <= answer_tokens[0] and answer_tokens[1] < window_start + length:
            features.start_positions[f] = answer_tokens[0] - window_start + context_start
            features.end_positions[f] = answer_tokens[1] - window_start + context_start
        features.example_index[f] = i
        f += 1
    return f


def _plan(example, question, context_index, context_ids, room, max_query_length, doc_stride):
    """(context index, question ids, window length, window starts) of one example; `room`: the
    tokens of a window left for question and context beside the special tokens."""
    ctx = context_index[example.context]
    if len(context_ids[ctx]) == 0:
        raise UserError(f"question {example.qid}: its context has no tokens ({example.context[:40]!r}...)")
    question_ids = np.asarray(question.ids[:max_query_length], dtype=np.int32)
    window_length = room - len(question_ids)
    return ctx, question_ids, window_length, window_starts(len(context_ids[ctx]), window_length, doc_stride)


def _tokenize_contexts(tokenizer: Tokenizer, contexts: list[str]):
    """Per context: token ids, character spans (see SquadFeatures.offsets), word spans."""
    encodings = tokenizer.encode_batch(contexts, add_special_tokens=False)
    ids = [np.asarray(e.ids, dtype=np.int32) for e in encodings]
    offsets = [
        _extend_over_removed_chars(
            context, _trim_whitespace(context, np.asarray(e.offsets, dtype=np.int32).reshape(-1, 2))
        )
        for context, e in zip(contexts, encodings)
    ]
    word_offsets = [_word_offsets(e.word_ids, spans) for e, spans in zip(encodings, offsets)]
    return ids, offsets, word_offsets


def _answer_tokens(example: SquadExample, spans: np.ndarray) -> tuple[int, ...] | None:
    """(first, last) context token of the first gold answer; None for a question without one, ()
    when the answer covers no token (whitespace or removed characters only)."""
    if not example.answers or example.is_impossible:
        return None
    answer = example.answers[0]
    # First token ending after the answer's first character, last token starting before its end.
    first = int(np.searchsorted(spans[:, 1], answer.start, side="right"))
    last = int(np.searchsorted(spans[:, 0], answer.end, side="left")) - 1
    return (first, last) if first <= last else ()


def _word_offsets(word_ids: list[int], offsets: np.ndarray) -> np.ndarray:
    """For each token, the character span of its word: from the start of the word's first piece
    to the end of its last (the pieces of a word are consecutive tokens with one word id)."""
    if not word_ids:
        return offsets
    word_ids = np.asarray(word_ids, dtype=np.int64)
    starts_word = np.r_[True, word_ids[1:] != word_ids[:-1]]
    first_piece = np.flatnonzero(starts_word)
    last_piece = np.r_[first_piece[1:], len(word_ids)] - 1
    word = np.cumsum(starts_word) - 1
    return np.stack([offsets[first_piece, 0][word], offsets[last_piece, 1][word]], axis=1)


def _trim_whitespace(context: str, offsets: np.ndarray) -> np.ndarray:
    """Start each token's span after the whitespace it holds (a byte-level BPE piece " word" spans
    the space), so that an answer cut out of the context by offsets has none in front. BERT's
    pieces hold none: their spans are unchanged."""
    if not len(offsets):
        return offsets
    codepoints = np.frombuffer(context.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    space = np.append(np.isin(codepoints, _WHITESPACE), False)  # the end of the context is no space
    for t in np.flatnonzero(space[offsets[:, 0]]):
        start, end = int(offsets[t, 0]), int(offsets[t, 1])
        while start < end and context[start].isspace():
            start += 1
        offsets[t, 0] = start
    return offsets


def _extend_over_removed_chars(context: str, offsets: np.ndarray) -> np.ndarray:
    """Let tokens cover the characters the normaliser deletes next to them: combining marks
    (uncased BERT strips accents, so the span of "cafe\u0301", a decomposed "café", would end
    before the accent), control and format characters such as zero-width spaces. An answer cut
    out of the context by offsets then keeps them, as the gold text does. A deleted character is
    one that no token covers and that is not whitespace."""
    change = np.zeros(
        len(context) + 1, dtype=np.int32
    )  # +1 where a gap between tokens opens, -1 where it closes
    change[0] = 1
    np.add.at(change, offsets[:, 0], -1)
    np.add.at(change, offsets[:, 1], 1)
    codepoints = np.frombuffer(context.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    removed = (np.cumsum(change)[:-1] > 0) & ~np.isin(codepoints, _WHITESPACE)
    if not removed.any():
        return offsets
    for t in range(len(offsets)):
        end, limit = int(offsets[t, 1]), int(offsets[t + 1, 0]) if t + 1 < len(offsets) else len(context)
        while end < limit and removed[end]:
            end += 1
        offsets[t, 1] = end
    for t in range(len(offsets)):
        start, limit = int(offsets[t, 0]), int(offsets[t - 1, 1]) if t > 0 else 0
        while start > limit and removed[start - 1]:
            start -= 1
        offsets[t, 0] = start
    return offsets


_WHITESPACE = np.array([c for c in range(0x3000 + 1) if chr(c).isspace()], dtype=np.uint32)


def _max_context_windows(num_tokens: int, window_length: int, starts: list[int]) -> np.ndarray:
    """For each context token, the window where it has the most context: score
    min(tokens left, tokens right) + 0.01 * window length, the first window winning ties
    (run_squad.py's _check_is_max_context)."""
    if len(starts) == 1:
        return np.zeros(num_tokens, dtype=np.int64)
    scores = np.full((len(starts), num_tokens), -np.inf)
    positions = np.arange(num_tokens)
    for w, window_start in enumerate(starts):
        length = min(window_length, num_tokens - window_start)
        p = positions[window_start : window_start + length]
        scores[w, window_start : window_start + length] = (
            np.minimum(p - window_start, window_start + length - 1 - p) + 0.01 * length
        )
    return scores.argmax(axis=0)
