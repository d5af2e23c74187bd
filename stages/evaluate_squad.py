"""Stage evaluate_squad: the official SQuAD EM/F1 of data/predictions on data/squad/dev.json.

    python -m stages.evaluate_squad

-> metrics/squad.json: what `python -m bert.squad dev.json predictions.json [--na-prob-file
null_odds.json]` prints (the official evaluate-v1.1.py / evaluate-v2.0.py figures), with v2.0's
`exact` named `exact_match` and `total` named `questions` as in v1.1, so one pair of keys holds EM
and F1 for `dvc metrics diff` across versions; plus `version` and `empty_answers`, the percentage
of questions answered "no answer" (""). A v2.0 model that answers no question at all (HasAns EM 0)
scores the share of unanswerable questions without having learnt anything: a warning says so.
"""

import logging
from pathlib import Path

from bert.atomic import write_json
from bert.errors import UserError, run_main
from bert.squad.dataset import dataset_version, read_json
from bert.squad.evaluation import evaluate, id_map, question_ids
from stages.common import layout

log = logging.getLogger("evaluate_squad")
DEV_FILE = layout.SQUAD_DEV
PREDICTIONS_DIR = layout.SQUAD_PREDICTIONS
METRICS_FILE = layout.metrics("squad")


def squad_metrics(dev_file: Path, predictions_dir: Path) -> dict:
    dataset = read_json(dev_file)
    version = dataset_version(dataset)
    predictions_file = predictions_dir / "predictions.json"
    predictions = id_map(read_json(predictions_file), str(predictions_file), (str,))
    # The official scripts score a question without a prediction 0; here it means predictions of
    # another dev set (predict_squad answers every question), and a figure of those would mislead.
    questions = question_ids(dataset, str(dev_file))
    missing = [qid for qid in questions if qid not in predictions]
    if missing:
        raise UserError(
            f"{predictions_file}: no answer for question {missing[0]} of {dev_file} ({len(missing)} of "
            f"{len(questions)} missing): these are not the predictions of this dev set; re-run predict_squad"
        )
    na_probs, odds_file = None, predictions_dir / "null_odds.json"
    if version == "v2.0":
        if not odds_file.is_file():
            raise UserError(f"{odds_file}: missing for a v2.0 dev set; re-run predict_squad")
        na_probs = id_map(read_json(odds_file), str(odds_file), (int, float))
    official = evaluate(dataset, predictions, na_probs, source=str(dev_file), na_prob_source=str(odds_file))
    renamed = {"exact": "exact_match", "total": "questions"}
    empty = sum(predictions[qid] == "" for qid in questions)
    if version == "v2.0" and empty == len(questions) and official.get("HasAns_total"):
        log.warning(
            "%s: every one of the %d questions is answered \"no answer\" (HasAns EM 0): EM %.2f is just the "
            "share of unanswerable questions; the model learnt to abstain, so check fine-tuning "
            "(%s, squad.recipe), or raise predict.null_score_diff_threshold towards best_f1_thresh",
            predictions_file, len(questions), official["exact"], layout.training_metrics(layout.SQUAD),
        )  # fmt: skip
    return {
        "version": version,
        "questions": len(questions),
        **{renamed.get(k, k): v for k, v in official.items()},
        "empty_answers": 100.0 * empty / len(questions),
    }


def main() -> None:
    metrics = squad_metrics(DEV_FILE, PREDICTIONS_DIR)
    write_json(METRICS_FILE, metrics)
    log.info("SQuAD %s, %d questions: EM %.2f, F1 %.2f -> %s", metrics["version"], metrics["questions"],
             metrics["exact_match"], metrics["f1"], METRICS_FILE)  # fmt: skip


if __name__ == "__main__":
    run_main(main)
