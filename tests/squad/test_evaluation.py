"""Official SQuAD v1.1 / v2.0 evaluation (bert.squad.evaluation and `python -m bert.squad`), hand-computed."""

import json
import subprocess
import sys

import pytest

from bert.errors import UserError, run_main
from bert.squad.evaluation import evaluate, exact_match_score, f1_score, main, normalize_answer

V2_KEYS = [
    "exact",
    "f1",
    "total",
    "HasAns_exact",
    "HasAns_f1",
    "HasAns_total",
    "NoAns_exact",
    "NoAns_f1",
    "NoAns_total",
]


def dataset(version, answers_by_qid):
    qas = []
    for qid, answers in answers_by_qid.items():
        qa = {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers]}
        if version.startswith("v2"):
            qa["is_impossible"] = not answers
        qas.append(qa)
    return {"version": version, "data": [{"title": "T", "paragraphs": [{"context": "c", "qas": qas}]}]}


V1 = dataset(
    "1.1",
    {
        "q1": ["Denver Broncos", "The Denver Broncos"],
        "q2": ["Santa Clara, California"],
        "q3": ["February 7, 2016", "Feb 7"],
        "q4": ["Levi's Stadium"],
        "q5": ["Super Bowl 50"],
    },
)
V1_PREDICTIONS = {
    "q1": "the Denver Broncos!",
    "q2": "Santa Clara",
    "q3": "7 February",
    "q4": "",
}  # q5 missing

V2 = dataset("v2.0", {"h1": ["Paris"], "h2": ["the city of Paris"], "h3": ["France"], "n1": [], "n2": []})
V2_PREDICTIONS = {"h1": "Paris", "h2": "Paris city", "h3": "", "n1": "", "n2": "Lyon"}
V2_NA_PROBS = {"h1": 0.1, "h2": 0.6, "h3": 0.3, "n1": 0.9, "n2": 0.8}


def test_normalisation():
    assert normalize_answer("The  Denver\tBroncos!") == "denver broncos"
    assert normalize_answer("An apple, a pear & the end.") == "apple pear end"
    assert normalize_answer("theatre another") == "theatre another"  # articles only as whole words
    assert normalize_answer("“Café”") == "“café”"  # only ASCII punctuation is removed, as in the scripts


def test_exact_and_partial_f1():
    assert exact_match_score("the Denver Broncos!", "Denver Broncos") == 1
    assert f1_score("Santa Clara", "Santa Clara, California") == pytest.approx(0.8)  # P 1, R 2/3
    assert f1_score("7 February", "Feb 7") == pytest.approx(0.5)  # P 1/2, R 1/2
    assert f1_score("Paris Paris", "Paris") == pytest.approx(2 / 3)  # P 1/2, R 1
    assert f1_score("", "") == 1.0 and f1_score("", "Paris") == 0.0 and f1_score("Lyon", "") == 0.0


def test_v1_hand_computed(capsys):
    result = evaluate(V1, V1_PREDICTIONS)
    assert list(result) == ["exact_match", "f1"]
    # EM: q1 only = 1/5. F1: 1 + 0.8 + max(0.8, 0.5) + 0 (empty) + 0 (missing) = 2.6 over 5.
    assert result["exact_match"] == pytest.approx(20.0)
    assert result["f1"] == pytest.approx(52.0)
    assert capsys.readouterr().err == "Unanswered question q5 will receive score 0.\n"


def test_v1_answer_that_normalises_to_nothing():
    """evaluate-v1.1.py: EM 1 (both normalise to ""), but F1 0 (no common token)."""
    result = evaluate(dataset("1.1", {"q": ["The"]}), {"q": "a"})
    assert result == {"exact_match": 100.0, "f1": 0.0}


def test_v2_hand_computed_breakdown():
    result = evaluate(V2, V2_PREDICTIONS)
    assert list(result) == V2_KEYS  # no best_* without no-answer probabilities
    # exact: h1, n1; F1: 1 + 0.8 + 0 + 1 + 0.
    assert result["exact"] == pytest.approx(40.0) and result["f1"] == pytest.approx(56.0)
    assert result["total"] == 5 and result["HasAns_total"] == 3 and result["NoAns_total"] == 2
    assert result["HasAns_exact"] == pytest.approx(100 / 3) and result["HasAns_f1"] == pytest.approx(60.0)
    assert result["NoAns_exact"] == pytest.approx(50.0) and result["NoAns_f1"] == pytest.approx(50.0)


def test_v2_best_threshold():
    """Start: every question answered "" -> the 2 unanswerable ones right. Rising no-answer
    probability: h1 (0.1) +1 -> 3; h3 (0.3) +0; h2 (0.6) +0 EM / +0.8 F1; n2 (0.8) -1 (answers
    "Lyon"); n1 (0.9) +0. Best EM 3/5 at 0.1; best F1 3.8/5 at 0.6."""
    result = evaluate(V2, V2_PREDICTIONS, V2_NA_PROBS)
    assert list(result) == V2_KEYS + ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert result["exact"] == pytest.approx(40.0)  # threshold 1.0: no probability exceeds it
    assert result["best_exact"] == pytest.approx(60.0) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(76.0) and result["best_f1_thresh"] == 0.6


def test_v2_na_prob_threshold_predicts_no_answer():
    # Threshold 0.5: h2, n1, n2 are predicted unanswerable -> h2 wrong, n1 and n2 right.
    result = evaluate(V2, V2_PREDICTIONS, V2_NA_PROBS, na_prob_thresh=0.5)
    assert result["exact"] == pytest.approx(60.0) and result["f1"] == pytest.approx(60.0)
    assert result["NoAns_exact"] == 100.0 and result["HasAns_f1"] == pytest.approx(100 / 3)


def test_v2_gold_that_normalises_to_nothing_counts_as_no_answer():
    result = evaluate(dataset("v2.0", {"q": ["The"]}), {"q": ""})
    assert result["exact"] == 100.0 and result["HasAns_total"] == 1 and "NoAns_total" not in result


def test_v2_missing_prediction_scores_zero(capsys):
    result = evaluate(V2, {k: v for k, v in V2_PREDICTIONS.items() if k != "n1"})
    assert result["total"] == 5 and result["NoAns_exact"] == 0.0
    assert "n1 will receive score 0" in capsys.readouterr().err
    with pytest.raises(UserError, match="no probability for question n1"):
        evaluate(V2, V2_PREDICTIONS, {k: v for k, v in V2_NA_PROBS.items() if k != "n1"})


def test_cli_prints_what_the_official_scripts_print(tmp_path, capsys):
    for name, data, predictions, expected in (
        ("v1", V1, V1_PREDICTIONS, json.dumps(evaluate(V1, V1_PREDICTIONS))),
        ("v2", V2, V2_PREDICTIONS, json.dumps(evaluate(V2, V2_PREDICTIONS), indent=2)),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
        (tmp_path / f"{name}-pred.json").write_text(json.dumps(predictions))
        capsys.readouterr()
        main([str(tmp_path / f"{name}.json"), str(tmp_path / f"{name}-pred.json")])
        assert capsys.readouterr().out == expected + "\n"
    (tmp_path / "na.json").write_text(json.dumps(V2_NA_PROBS))
    out = tmp_path / "out" / "eval.json"
    main(
        [
            str(tmp_path / "v2.json"),
            str(tmp_path / "v2-pred.json"),
            "--na-prob-file",
            str(tmp_path / "na.json"),
            "--out-file",
            str(out),
        ]
    )
    assert capsys.readouterr().out == ""  # like evaluate-v2.0.py -o: written, not printed
    assert json.loads(out.read_text())["best_f1"] == pytest.approx(76.0)


def test_cli_bad_input_is_one_line_without_traceback(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps(V1))
    (tmp_path / "pred.json").write_text(json.dumps({"q1": 3}))
    run = subprocess.run(
        [sys.executable, "-m", "bert.squad", str(tmp_path / "data.json"), str(tmp_path / "pred.json")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'pred.json'}: expected a JSON object mapping question ids to strings"
    ]
    (tmp_path / "bad.json").write_text(json.dumps({"data": [{"paragraphs": [{"qas": [{"question": "?"}]}]}]}))
    with pytest.raises(SystemExit) as exit_info:
        run_main(lambda: main([str(tmp_path / "bad.json"), str(tmp_path / "pred.json")]))
    assert exit_info.value.code == 1


@pytest.mark.parametrize("answered", [True, False])
def test_evaluate_stage_counts_empty_answers_and_warns_when_every_answer_is_empty(tmp_path, caplog, answered):
    """metrics/squad.json keeps the official fields and adds `empty_answers` (% of questions answered
    ""); a v2.0 model that abstains on every question (HasAns EM 0) gets one warning line."""
    import logging

    from stages.evaluate_squad import squad_metrics

    predictions = V2_PREDICTIONS if answered else dict.fromkeys(V2_PREDICTIONS, "")
    (tmp_path / "dev.json").write_text(json.dumps(V2))
    (tmp_path / "predictions.json").write_text(json.dumps(predictions))
    (tmp_path / "null_odds.json").write_text(json.dumps(V2_NA_PROBS))
    with caplog.at_level(logging.WARNING):
        metrics = squad_metrics(tmp_path / "dev.json", tmp_path)
    official = evaluate(V2, predictions, V2_NA_PROBS)
    renamed = {"exact": "exact_match", "total": "questions"}
    assert {k: v for k, v in metrics.items() if k not in ("version", "empty_answers")} == {
        renamed.get(k, k): v for k, v in official.items()
    }
    assert metrics["empty_answers"] == pytest.approx(40.0 if answered else 100.0)
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    if answered:
        assert warnings == []
    else:
        assert len(warnings) == 1 and "\n" not in warnings[0]
        assert 'every one of the 5 questions is answered "no answer" (HasAns EM 0): EM 40.00' in warnings[0]
