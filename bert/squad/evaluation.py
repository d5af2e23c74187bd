"""The official SQuAD evaluation: exactly what evaluate-v1.1.py and evaluate-v2.0.py compute, and
as a command line (`python -m bert.squad DATA_FILE PRED_FILE [--na-prob-file F]`, see
`bert/squad/__main__.py`) what they print."""

import argparse
import collections
import json
import re
import string
import sys

from bert.atomic import atomic_file
from bert.errors import UserError
from bert.squad.dataset import dataset_version, read_json


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
    source: str = "dataset",
    na_prob_source: str = "na-prob file",
) -> dict:
    """The official metrics for the dataset's version: v1.1 {exact_match, f1}; v2.0 {exact, f1,
    total, HasAns_*, NoAns_*} and, with `na_probs`, best_exact/best_f1 and their thresholds.
    A question without a prediction scores 0 (with a message on stderr). `source` and
    `na_prob_source` name the dataset and the na_probs in error messages."""
    questions = _questions(dataset_json, source)
    for qa in questions:
        if qa["id"] not in predictions:
            print(f"Unanswered question {qa['id']} will receive score 0.", file=sys.stderr)
    if dataset_version(dataset_json) == "v1.1":
        unanswerable = next((qa["id"] for qa in questions if not qa["answers"]), None)
        if unanswerable is not None:
            raise UserError(
                f"{source}: question {unanswerable} has no answers, a SQuAD v2.0 question, but the file says "
                f'version {dataset_json.get("version")!r}; set "version": "v2.0" in it'
            )
        return _evaluate_v1(questions, predictions)
    return _evaluate_v2(questions, predictions, na_probs, na_prob_thresh, na_prob_source)


def question_ids(dataset_json: dict, source: str = "dataset") -> list[str]:
    """The ids of a dataset's questions, in file order (a UserError naming `source` if it is not SQuAD)."""
    return [qa["id"] for qa in _questions(dataset_json, source)]


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
    na_prob_source: str,
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
            raise UserError(
                f"{na_prob_source}: no probability for question {absent[0]} ({len(absent)} missing)"
            )

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


def id_map(obj, path: str, value_types: tuple) -> dict:
    """`obj` (read from `path`) checked to map question ids to values of `value_types`."""
    if not isinstance(obj, dict) or not all(isinstance(v, value_types) for v in obj.values()):
        kind = "strings" if value_types == (str,) else "numbers"
        raise UserError(f"{path}: expected a JSON object mapping question ids to {kind}")
    return obj


def main(argv: list[str] | None = None) -> None:
    """The official scripts' command line; a bad input file is a UserError (one line, via run_main)."""
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
    dataset = read_json(args.data_file)
    _questions(dataset, source=args.data_file)
    predictions = id_map(read_json(args.pred_file), args.pred_file, (str,))
    na_probs = None
    if args.na_prob_file:
        na_probs = id_map(read_json(args.na_prob_file), args.na_prob_file, (int, float))
    result = evaluate(
        dataset,
        predictions,
        na_probs,
        args.na_prob_thresh,
        source=args.data_file,
        na_prob_source=args.na_prob_file,
    )
    if args.out_file:
        with atomic_file(args.out_file) as tmp:
            tmp.write_text(json.dumps(result))  # as evaluate-v2.0.py -o writes it: one line, no newline
    elif dataset_version(dataset) == "v1.1":
        print(json.dumps(result))  # evaluate-v1.1.py prints one line
    else:
        print(json.dumps(result, indent=2))
