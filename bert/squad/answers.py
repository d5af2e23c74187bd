"""From start/end logits over the windows to answer strings: the n-best spans of each window,
merged over the windows of a question, each cut out of the original context from the start of
its first token's word to the end of its last token's word (so an answer is always a substring
of the context and never ends inside a word), and for SQuAD 2.0 the null answer.
"""

import collections
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from bert.squad.dataset import SquadExample
from bert.squad.features import SquadFeatures


class Span(NamedTuple):
    """A candidate answer: its text ("" for the null answer) and the logits of its first and last token."""

    text: str
    start_logit: float
    end_logit: float

    @property
    def score(self) -> float:
        return self.start_logit + self.end_logit


NO_SPAN = Span("", 0.0, 0.0)  # a question without any candidate span (scored as HF's run_qa does)


def postprocess(
    examples: list[SquadExample],
    features: SquadFeatures,
    start_logits,
    end_logits,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> tuple[dict[str, str], dict[str, list[dict]], dict[str, float]]:
    """Answer strings from logits [F, S]: (predictions {qid: text}, nbest {qid: [{text,
    probability, start_logit, end_logit}, ...]}, null_odds {qid: null score - best span score},
    the last empty unless `version_2`).

    Per window, the `n_best_size` best starts (context tokens in their max-context window) and
    ends (context tokens) form the candidate spans: end not before start, at most
    `max_answer_length` tokens. Restricting the top-k to valid positions (run_squad.py takes it
    over all positions, then filters) means a question always has a candidate. Candidates of all
    windows are ranked by start + end logit, deduplicated by text. For v2.0 the null answer
    competes with them (see `null_answer` and `choose_answer`).

    An answer's text runs from the start of its first token's word to the end of its last
    token's word (`features.word_offsets`): a span ending on a piece inside a word, "cr ##uso"
    of "cr ##uso ##e", answers "Crusoe", not "Cruso". Punctuation marks are words of their own,
    so "Lincoln" stays "Lincoln" before "Lincoln," and "state-of-the" stays as predicted.
    google-research/bert's run_squad.py would answer "Cruso" here: get_final_text aligns the
    de-tokenised prediction with the original words and cuts them character by character."""
    start_logits, end_logits = _checked_logits(
        features, start_logits, end_logits, n_best_size, max_answer_length
    )
    candidates = _candidate_spans(
        features, start_logits, end_logits, n_best_size, max_answer_length, len(examples)
    )
    windows_of = collections.defaultdict(list)
    for f, i in enumerate(features.example_index.tolist()):
        windows_of[i].append(f)

    predictions, nbest_json, null_odds = {}, {}, {}
    for i, example in enumerate(examples):
        null = null_answer(start_logits, end_logits, windows_of[i]) if version_2 else None
        nbest = n_best(candidates.ranked(i, example.context), n_best_size, null)
        nbest_json[example.qid] = _nbest_entries(nbest)
        best_span = next((span for span in nbest if span.text), NO_SPAN)
        if null is None:
            predictions[example.qid] = best_span.text
        else:
            predictions[example.qid], null_odds[example.qid] = choose_answer(
                best_span, null, null_score_diff_threshold
            )
    return predictions, nbest_json, null_odds


def _checked_logits(
    features: SquadFeatures, start_logits, end_logits, n_best_size: int, max_answer_length: int
) -> tuple[np.ndarray, np.ndarray]:
    """The logits as float32 arrays, once the sizes and their shapes are checked (ValueError)."""
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError("n_best_size and max_answer_length must be at least 1")
    start_logits = np.asarray(start_logits, dtype=np.float32)
    end_logits = np.asarray(end_logits, dtype=np.float32)
    if start_logits.shape != features.input_ids.shape or end_logits.shape != features.input_ids.shape:
        raise ValueError(
            f"logits of shape {start_logits.shape} / {end_logits.shape} do not match "
            f"the features {features.input_ids.shape}"
        )
    return start_logits, end_logits


class _Candidates(NamedTuple):
    """The candidate spans of every window, one row each, grouped by question (windows in their
    order): question i's are rows bounds[i]:bounds[i + 1]. A span's answer is the context's
    characters first_char:end_char."""

    score: np.ndarray
    start_logit: np.ndarray
    end_logit: np.ndarray
    first_char: np.ndarray
    end_char: np.ndarray
    bounds: np.ndarray

    def ranked(self, question: int, context: str) -> Iterable[tuple[float, Span]]:
        """A question's (score, span) pairs, best first, ties in window order; each span's text is
        cut out of the context only as far as the n-best list reads them."""
        lo, hi = self.bounds[question], self.bounds[question + 1]
        ranked = lo + np.argsort(-self.score[lo:hi], kind="stable")
        spans = (
            Span(
                context[self.first_char[c] : self.end_char[c]],
                float(self.start_logit[c]),
                float(self.end_logit[c]),
            )
            for c in ranked
        )
        return zip(self.score[ranked], spans)


def _candidate_spans(
    features: SquadFeatures,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int,
    max_answer_length: int,
    questions: int,
) -> _Candidates:
    """Candidate spans of all windows at once: the k best starts x the k best ends of each window
    (k = n_best_size, or the window's length when shorter), the end not before the start, at most
    max_answer_length tokens."""
    k = min(n_best_size, start_logits.shape[1])
    top_starts, start_ok = _top_positions(start_logits, features.token_is_max_context, k)
    top_ends, end_ok = _top_positions(end_logits, features.offsets[:, :, 0] >= 0, k)
    start_values = np.take_along_axis(start_logits, top_starts, axis=1)
    end_values = np.take_along_axis(end_logits, top_ends, axis=1)
    s, e = top_starts[:, :, None], top_ends[:, None, :]
    valid = start_ok[:, :, None] & end_ok[:, None, :] & (e >= s) & (e - s < max_answer_length)
    window, start_rank, end_rank = np.nonzero(valid)
    start_logit, end_logit = start_values[window, start_rank], end_values[window, end_rank]
    score = start_logit + end_logit
    start, end = top_starts[window, start_rank], top_ends[window, end_rank]
    first_char, end_char = features.word_offsets[window, start, 0], features.word_offsets[window, end, 1]
    # Group the candidates by question (stable: windows keep their order) and find each question's rows.
    by_example = np.argsort(features.example_index[window], kind="stable")
    window = window[by_example]
    bounds = np.searchsorted(features.example_index[window], np.arange(questions + 1))
    columns = (score, start_logit, end_logit, first_char, end_char)
    return _Candidates(*(column[by_example] for column in columns), bounds)


def _nbest_entries(nbest: list[Span]) -> list[dict]:
    """The n-best list as nbest_predictions.json holds it, each span with its softmax probability
    over the list."""
    totals = np.array([span.score for span in nbest], dtype=np.float64)
    probabilities = np.exp(totals - totals.max())
    probabilities /= probabilities.sum()
    return [
        {
            "text": span.text,
            "probability": float(p),
            "start_logit": span.start_logit,
            "end_logit": span.end_logit,
        }
        for span, p in zip(nbest, probabilities)
    ]


def n_best(
    candidates: Iterable[tuple[float, Span]], n_best_size: int, null: Span | None = None
) -> list[Span]:
    """The n-best list of a question from its candidate spans, best first, each with the (float32)
    score they were ranked by: each text once, and for SQuAD 2.0 (`null` given) the null answer
    at its rank among them, or last when `n_best_size` spans outscore it: it is always listed."""
    nbest, seen = [], set()
    null_pending = null is not None
    for score, span in candidates:
        if len(nbest) >= n_best_size:
            break
        if null_pending and null.score > score:
            nbest.append(null)
            seen.add("")
            null_pending = False
            if len(nbest) >= n_best_size:
                break
        if span.text not in seen:
            seen.add(span.text)
            nbest.append(span)
    if null is not None and "" not in seen:
        nbest.append(null)
    return nbest or [NO_SPAN]  # no start among the k best precedes an end among the k best


def null_answer(start_logits: np.ndarray, end_logits: np.ndarray, windows: list[int]) -> Span:
    """SQuAD 2.0's "no answer": the span [CLS]..[CLS], taken from the question's window where it
    scores lowest (run_squad.py: the model is most sure there that the answer is somewhere)."""
    null_scores = start_logits[windows, 0] + end_logits[windows, 0]
    f = windows[int(np.argmin(null_scores))]
    return Span("", float(start_logits[f, 0]), float(end_logits[f, 0]))


def choose_answer(best_span: Span, null: Span, null_score_diff_threshold: float) -> tuple[str, float]:
    """The answer of a SQuAD 2.0 question and its null odds (null score minus the best span's
    score): "" when the null answer beats the best span by more than the threshold."""
    null_odds = null.score - best_span.score
    return ("" if null_odds > null_score_diff_threshold else best_span.text), null_odds


def _top_positions(logits: np.ndarray, allowed: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the k allowed positions with the highest logits, best first, ties to the left
    ([F, k]), and whether each is allowed at all (rows with fewer than k allowed positions)."""
    top = np.argsort(-np.where(allowed, logits, -np.inf), axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(allowed, top, axis=1)
