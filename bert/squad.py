"""SQuAD v1.1 / v2.0: loading, windowed features, answer post-processing, official EM/F1.

The pieces, in the order a question goes through them:

1. `load_examples` reads the official nested JSON (data[].paragraphs[].qas[]) into `SquadExample`s.
2. `make_features` tokenises question and context with the fast tokenizer and cuts the context
   into windows of `max_seq_length` tokens, `doc_stride` tokens apart, as google-research/bert's
   run_squad.py does. Every context token keeps its character span in the original context
   (the tokenizer's offsets refer to the string before lower-casing and accent stripping), so an
   answer maps to tokens and back without any approximate text alignment.
3. `postprocess` turns start/end logits into answer strings: the n-best spans per window, merged
   over the windows of a question, each span cut out of the original context by its offsets.
4. `evaluate` computes exactly what the official evaluate-v1.1.py / evaluate-v2.0.py compute;
   `python -m bert.squad DATA_FILE PRED_FILE` prints what they print.
"""

import argparse
import collections
import dataclasses
import json
import logging
import os
import re
import string
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tqdm import tqdm

from bert.errors import UserError

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------
# Loading


@dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset of `text` in the context

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass
class SquadExample:
    qid: str
    title: str
    question: str
    context: str
    answers: list[Answer]  # empty for v2.0's unanswerable questions
    is_impossible: bool = False
    plausible_answers: list[Answer] = field(default_factory=list)  # v2.0, for unanswerable ones


def read_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UserError(f"{path}: not a JSON file ({error})") from None


def dataset_version(path_or_json: str | Path | dict) -> str:
    """'v1.1' or 'v2.0'. The file's `version` field decides ("1.1", "v2.0"); without one, a file
    whose questions carry `is_impossible` is v2.0."""
    dataset = path_or_json if isinstance(path_or_json, dict) else read_json(path_or_json)
    version = str(dataset.get("version", "")).lstrip("v")
    if version.startswith("2"):
        return "v2.0"
    if version.startswith("1"):
        return "v1.1"
    for article in dataset.get("data", []):
        for paragraph in article.get("paragraphs", []):
            if any("is_impossible" in qa for qa in paragraph.get("qas", [])):
                return "v2.0"
    return "v1.1"


def load_examples(path: str | Path) -> list[SquadExample]:
    """Every question of a SQuAD JSON file, in file order. Answers are checked against their
    context: the text must be found at `answer_start` (plausible_answers are kept unchecked)."""
    return examples_from_json(read_json(path), source=str(path))


def examples_from_json(dataset: dict, source: str = "<json>") -> list[SquadExample]:
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise UserError(f"{source}: not a SQuAD file: no top-level 'data' list")
    examples, seen = [], set()
    for article_index, article in enumerate(dataset["data"]):
        title = article.get("title", "") if isinstance(article, dict) else ""
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise UserError(f"{source}: data[{article_index}] ({title!r}) has no 'paragraphs' list")
        for paragraph_index, paragraph in enumerate(paragraphs):
            where = f"{source}: data[{article_index}].paragraphs[{paragraph_index}]"
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not context.strip():
                raise UserError(f"{where}: missing or empty 'context'")
            if not isinstance(paragraph.get("qas"), list):
                raise UserError(f"{where}: no 'qas' list")
            for qa in paragraph["qas"]:
                qid = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qid, str):
                    raise UserError(f"{where}: a question without an 'id'")
                if qid in seen:
                    raise UserError(f"{source}: question id {qid!r} occurs twice")
                seen.add(qid)
                for key in ("question", "answers"):
                    if key not in qa:
                        raise UserError(f"{source}: question {qid}: missing key {key!r}")
                is_impossible = bool(qa.get("is_impossible", False))
                answers = [_answer(a, context, source, qid, check=True) for a in qa["answers"]]
                if not answers and not is_impossible:
                    raise UserError(f"{source}: question {qid}: no answers and not marked is_impossible")
                plausible = [
                    _answer(a, context, source, qid, check=False) for a in qa.get("plausible_answers", [])
                ]
                examples.append(
                    SquadExample(qid, title, qa["question"], context, answers, is_impossible, plausible)
                )
    return examples


def _answer(answer: dict, context: str, source: str, qid: str, check: bool) -> Answer:
    if not isinstance(answer, dict) or "text" not in answer or "answer_start" not in answer:
        raise UserError(f"{source}: question {qid}: an answer lacks 'text' or 'answer_start'")
    text, start = answer["text"], answer["answer_start"]
    if not isinstance(text, str) or not isinstance(start, int):
        raise UserError(
            f"{source}: question {qid}: answer 'text' must be a string and 'answer_start' an integer"
        )
    found = context[start : start + len(text)]
    if check and (start < 0 or found != text):
        raise UserError(
            f"{source}: question {qid}: answer {text!r} is not at answer_start {start} of its context "
            f"(the context has {found!r} there)"
        )
    return Answer(text, start)


# ----------------------------------------------------------------------------------------------
# Features


@dataclass
class SquadFeatures:
    """One row per window: [CLS] question [SEP] context window [SEP] [PAD]...

    `offsets[f, i]` is the (start, end) character span of token i in the context of example
    `example_index[f]`, and (-1, -1) for question, special and padding tokens.
    `start_positions`/`end_positions` are the answer's token positions in the window (first gold
    answer), 0 ([CLS]) when the window does not hold the whole answer or the question has none.
    `token_is_max_context[f, i]` marks the one window in which each context token has the most
    context on both sides; predictions only start at such tokens (as run_squad.py does)."""

    input_ids: np.ndarray  # int32 [F, S]
    token_type_ids: np.ndarray  # int8 [F, S]
    attention_mask: np.ndarray  # int8 [F, S]
    start_positions: np.ndarray  # int32 [F]
    end_positions: np.ndarray  # int32 [F]
    example_index: np.ndarray  # int32 [F]
    offsets: np.ndarray  # int32 [F, S, 2]
    token_is_max_context: np.ndarray  # bool [F, S]

    def __len__(self) -> int:
        return len(self.input_ids)

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
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    progress: bool = True,
) -> SquadFeatures:
    """Tokenise and window every example (see `SquadFeatures`). Questions are cut to
    `max_query_length` tokens; each distinct context is tokenised once."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError(
            f"max_seq_length ({max_seq_length}) must exceed max_query_length + 3 ({max_query_length + 3})"
        )
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}")
    # A private copy: truncation or padding configured on the caller's tokenizer would cut contexts.
    tokenizer = Tokenizer.from_str(tokenizer.to_str())
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cls_id, sep_id, pad_id = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))

    context_index: dict[str, int] = {}
    for example in examples:
        context_index.setdefault(example.context, len(context_index))
    question_encodings = tokenizer.encode_batch([e.question for e in examples], add_special_tokens=False)
    context_encodings = tokenizer.encode_batch(list(context_index), add_special_tokens=False)
    context_ids = [np.asarray(e.ids, dtype=np.int32) for e in context_encodings]
    context_offsets = [
        _extend_over_removed_chars(context, np.asarray(e.offsets, dtype=np.int32).reshape(-1, 2))
        for context, e in zip(context_index, context_encodings)
    ]

    # First pass: the windows of every example, so the arrays are allocated once.
    plans = []
    for example, question in zip(examples, question_encodings):
        ctx = context_index[example.context]
        if len(context_ids[ctx]) == 0:
            raise UserError(
                f"question {example.qid}: its context has no tokens ({example.context[:40]!r}...)"
            )
        question_ids = np.asarray(question.ids[:max_query_length], dtype=np.int32)
        window_length = max_seq_length - len(question_ids) - 3
        starts = window_starts(len(context_ids[ctx]), window_length, doc_stride)
        plans.append((ctx, question_ids, window_length, starts))
    num_features = sum(len(plan[3]) for plan in plans)

    input_ids = np.full((num_features, max_seq_length), pad_id, dtype=np.int32)
    token_type_ids = np.zeros((num_features, max_seq_length), dtype=np.int8)
    attention_mask = np.zeros((num_features, max_seq_length), dtype=np.int8)
    start_positions = np.zeros(num_features, dtype=np.int32)
    end_positions = np.zeros(num_features, dtype=np.int32)
    example_index = np.zeros(num_features, dtype=np.int32)
    offsets = np.full((num_features, max_seq_length, 2), -1, dtype=np.int32)
    token_is_max_context = np.zeros((num_features, max_seq_length), dtype=bool)

    unmappable = 0
    f = 0
    for i, (example, (ctx, question_ids, window_length, starts)) in enumerate(
        tqdm(zip(examples, plans), total=len(examples), desc="SQuAD features", unit="q", disable=not progress)
    ):
        ids, spans = context_ids[ctx], context_offsets[ctx]
        num_tokens = len(ids)
        answer_tokens = None
        if example.answers and not example.is_impossible:
            answer = example.answers[0]
            # First token ending after the answer's first character, last token starting before its end.
            first = int(np.searchsorted(spans[:, 1], answer.start, side="right"))
            last = int(np.searchsorted(spans[:, 0], answer.end, side="left")) - 1
            if first <= last:
                answer_tokens = (first, last)
            else:
                unmappable += 1
        best_window = _max_context_windows(num_tokens, window_length, starts)
        context_start = len(question_ids) + 2  # after [CLS] question [SEP]
        for w, window_start in enumerate(starts):
            length = min(window_length, num_tokens - window_start)
            window = slice(window_start, window_start + length)
            placed = slice(context_start, context_start + length)
            input_ids[f, 0] = cls_id
            input_ids[f, 1 : context_start - 1] = question_ids
            input_ids[f, context_start - 1] = sep_id
            input_ids[f, placed] = ids[window]
            input_ids[f, context_start + length] = sep_id
            token_type_ids[f, context_start : context_start + length + 1] = 1
            attention_mask[f, : context_start + length + 1] = 1
            offsets[f, placed] = spans[window]
            token_is_max_context[f, placed] = best_window[window] == w
            if (
                answer_tokens
                and window_start <= answer_tokens[0]
                and answer_tokens[1] < window_start + length
            ):
                start_positions[f] = answer_tokens[0] - window_start + context_start
                end_positions[f] = answer_tokens[1] - window_start + context_start
            example_index[f] = i
            f += 1
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
    return SquadFeatures(
        input_ids,
        token_type_ids,
        attention_mask,
        start_positions,
        end_positions,
        example_index,
        offsets,
        token_is_max_context,
    )


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


# ----------------------------------------------------------------------------------------------
# Post-processing


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
    scores the minimum over windows of start[CLS] + end[CLS], and "" is predicted when it beats
    the best span by more than `null_score_diff_threshold`."""
    if n_best_size < 1 or max_answer_length < 1:
        raise ValueError("n_best_size and max_answer_length must be at least 1")
    start_logits = np.asarray(start_logits, dtype=np.float32)
    end_logits = np.asarray(end_logits, dtype=np.float32)
    if start_logits.shape != features.input_ids.shape or end_logits.shape != features.input_ids.shape:
        raise ValueError(
            f"logits of shape {start_logits.shape} / {end_logits.shape} do not match "
            f"the features {features.input_ids.shape}"
        )
    # Candidate spans of all windows at once: the k best starts x the k best ends of each window.
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
    # Group the candidates by question (stable: windows keep their order) and find each question's windows.
    by_example = np.argsort(features.example_index[window], kind="stable")
    window, start, end, score = window[by_example], start[by_example], end[by_example], score[by_example]
    start_logit, end_logit = start_logit[by_example], end_logit[by_example]
    bounds = np.searchsorted(features.example_index[window], np.arange(len(examples) + 1))
    windows_of = collections.defaultdict(list)
    for f, i in enumerate(features.example_index.tolist()):
        windows_of[i].append(f)
    null_scores = start_logits[:, 0] + end_logits[:, 0]

    predictions, nbest_json, null_odds = {}, {}, {}
    for i, example in enumerate(examples):
        f = windows_of[i][int(np.argmin(null_scores[windows_of[i]]))]  # the window with the lowest null score
        null_start, null_end = float(start_logits[f, 0]), float(end_logits[f, 0])
        null = (null_start + null_end, null_start, null_end)
        lo, hi = bounds[i], bounds[i + 1]
        entries, seen = [], set()
        null_pending = version_2
        for c in lo + np.argsort(-score[lo:hi], kind="stable"):
            if len(entries) >= n_best_size:
                break
            if null_pending and null[0] > score[c]:
                entries.append(("", null[1], null[2]))
                seen.add("")
                null_pending = False
                if len(entries) >= n_best_size:
                    break
            span = features.offsets[window[c]]
            text = example.context[span[start[c], 0] : span[end[c], 1]]
            if text not in seen:
                seen.add(text)
                entries.append((text, float(start_logit[c]), float(end_logit[c])))
        if version_2 and "" not in seen:  # the null answer is always listed for v2.0
            entries.append(("", null[1], null[2]))
        if not entries:  # no start among the k best precedes an end among the k best
            entries.append(("", 0.0, 0.0))
        totals = np.array([entry[1] + entry[2] for entry in entries], dtype=np.float64)
        probabilities = np.exp(totals - totals.max())
        probabilities /= probabilities.sum()
        nbest_json[example.qid] = [
            {"text": text, "probability": float(p), "start_logit": s, "end_logit": e}
            for (text, s, e), p in zip(entries, probabilities)
        ]
        # Without any span, the best "span" is empty with logits 0 (as HF's run_qa scores it).
        best_span = next((entry for entry in entries if entry[0]), ("", 0.0, 0.0))
        if not version_2:
            predictions[example.qid] = best_span[0]
            continue
        score_diff = null[0] - (best_span[1] + best_span[2])
        null_odds[example.qid] = score_diff
        predictions[example.qid] = "" if score_diff > null_score_diff_threshold else best_span[0]
    return predictions, nbest_json, null_odds


def _top_positions(logits: np.ndarray, allowed: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the k allowed positions with the highest logits, best first, ties to the left
    ([F, k]), and whether each is allowed at all (rows with fewer than k allowed positions)."""
    top = np.argsort(-np.where(allowed, logits, -np.inf), axis=1, kind="stable")[:, :k]
    return top, np.take_along_axis(allowed, top, axis=1)


# ----------------------------------------------------------------------------------------------
# Official evaluation (evaluate-v1.1.py and evaluate-v2.0.py, computed the same way)


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, the articles a/an/the, and extra whitespace."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


_PUNCTUATION = set(string.punctuation)


def exact_match_score(prediction: str, gold: str) -> int:
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token-overlap F1 of the normalised answers; two empty answers agree (1.0), as in v2.0."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    common = sum((collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def evaluate(
    dataset_json: dict,
    predictions: dict[str, str],
    na_probs: dict[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict:
    """The official metrics for the dataset's version: v1.1 {exact_match, f1}; v2.0 {exact, f1,
    total, HasAns_*, NoAns_*} and, with `na_probs`, best_exact/best_f1 and their thresholds.
    A question without a prediction scores 0 (with a message on stderr)."""
    questions = _questions(dataset_json)
    for qa in questions:
        if qa["id"] not in predictions:
            print(f"Unanswered question {qa['id']} will receive score 0.", file=sys.stderr)
    if dataset_version(dataset_json) == "v1.1":
        return _evaluate_v1(questions, predictions)
    return _evaluate_v2(questions, predictions, na_probs, na_prob_thresh)


def _questions(dataset_json: dict, source: str = "dataset") -> list[dict]:
    """The flat list of a dataset's questions, each with an id and answer texts."""
    try:
        questions = [qa for article in dataset_json["data"] for p in article["paragraphs"] for qa in p["qas"]]
        for qa in questions:
            if not isinstance(qa["id"], str) or not all(isinstance(a["text"], str) for a in qa["answers"]):
                raise TypeError("'id' or answer 'text' not a string")
    except (KeyError, TypeError) as error:
        raise UserError(f"{source}: not in the SQuAD layout data[].paragraphs[].qas[] ({error})") from None
    if not questions:
        raise UserError(f"{source}: has no questions")
    return questions


def _evaluate_v1(questions: list[dict], predictions: dict[str, str]) -> dict:
    exact = f1 = 0.0
    for qa in questions:
        if qa["id"] not in predictions:
            continue
        prediction, golds = predictions[qa["id"]], [a["text"] for a in qa["answers"]]
        exact += max(exact_match_score(prediction, gold) for gold in golds)
        # evaluate-v1.1.py gives F1 0, not 1, when both answers normalise to nothing.
        f1 += max(f1_score(prediction, gold) if normalize_answer(prediction) else 0.0 for gold in golds)
    return {"exact_match": 100.0 * exact / len(questions), "f1": 100.0 * f1 / len(questions)}


def _evaluate_v2(
    questions: list[dict],
    predictions: dict[str, str],
    na_probs: dict[str, float] | None,
    na_prob_thresh: float,
) -> dict:
    has_answer = {qa["id"]: bool(qa["answers"]) for qa in questions}
    exact_raw, f1_raw = {}, {}
    for qa in questions:
        qid = qa["id"]
        # An unanswerable question's only right answer is "" (answers that normalise to nothing count as none).
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        prediction = predictions.get(qid)
        exact_raw[qid] = 0 if prediction is None else max(exact_match_score(prediction, g) for g in golds)
        f1_raw[qid] = 0.0 if prediction is None else max(f1_score(prediction, g) for g in golds)
    if na_probs is not None:
        absent = [qid for qid in predictions if qid in has_answer and qid not in na_probs]
        if absent:
            raise UserError(f"na-prob file: no probability for question {absent[0]} ({len(absent)} missing)")

    def thresholded(scores: dict) -> dict:
        # "No answer" is predicted when the no-answer probability (0 without a file) exceeds the threshold.
        return {
            qid: float(not has_answer[qid])
            if qid in predictions and (na_probs[qid] if na_probs is not None else 0.0) > na_prob_thresh
            else score
            for qid, score in scores.items()
        }

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids: list[str]) -> dict:
        return {
            "exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1[q] for q in qids) / len(qids),
            "total": len(qids),
        }

    result = summary(list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid, has in has_answer.items() if has == wanted]
        if qids:
            result.update({f"{prefix}_{key}": value for key, value in summary(qids).items()})
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            best, threshold = _best_threshold(predictions, raw, na_probs, has_answer)
            result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
    return result


def _best_threshold(
    predictions: dict[str, str],
    scores: dict[str, float],
    na_probs: dict[str, float],
    has_answer: dict[str, bool],
) -> tuple[float, float]:
    """The no-answer threshold with the best score, as evaluate-v2.0.py finds it: start with every
    question answered "" (each unanswerable one right), then, in order of rising no-answer
    probability, let each question keep its span answer and track the best running score."""
    score = best = sum(1 for qid, has in has_answer.items() if not has and qid in predictions)
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores or qid not in predictions:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


# ----------------------------------------------------------------------------------------------
# Command line: the official evaluation scripts


def _write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        json.dump(obj, tmp)
    os.replace(tmp.name, path)


def _string_map(obj, path: str, value_types: tuple) -> dict:
    if not isinstance(obj, dict) or not all(isinstance(v, value_types) for v in obj.values()):
        kind = "strings" if value_types == (str,) else "numbers"
        raise UserError(f"{path}: expected a JSON object mapping question ids to {kind}")
    return obj


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bert.squad",
        description="Official SQuAD evaluation (v1.1 or v2.0, chosen from the data file's version).",
    )
    parser.add_argument("data_file", help="SQuAD JSON with the gold answers (e.g. dev-v1.1.json)")
    parser.add_argument("pred_file", help="predictions JSON {question id: answer text}")
    parser.add_argument(
        "--na-prob-file", "-n", help="v2.0: JSON {question id: no-answer score} (null_odds.json)"
    )
    parser.add_argument(
        "--na-prob-thresh",
        "-t",
        type=float,
        default=1.0,
        help='v2.0: predict "" when the no-answer score exceeds this (default 1.0)',
    )
    parser.add_argument("--out-file", "-o", help="write the metrics JSON here instead of printing it")
    args = parser.parse_args(argv)
    try:
        dataset = read_json(args.data_file)
        _questions(dataset, source=args.data_file)
        predictions = _string_map(read_json(args.pred_file), args.pred_file, (str,))
        na_probs = None
        if args.na_prob_file:
            na_probs = _string_map(read_json(args.na_prob_file), args.na_prob_file, (int, float))
        result = evaluate(dataset, predictions, na_probs, args.na_prob_thresh)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    if args.out_file:
        _write_json_atomic(Path(args.out_file), result)
    elif dataset_version(dataset) == "v1.1":
        print(json.dumps(result))  # evaluate-v1.1.py prints one line
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
