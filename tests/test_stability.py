"""The stability summary over DVC experiments (per-seed EM/F1, mean and standard deviation)."""

import re

import pytest

from bert.errors import UserError
from scripts.stability import counted_line, experiment_rows, skipped_runs, summarize


def _experiment(name: str, seed: int, metrics: dict | None) -> dict:
    data = {"params": {"params.yaml": {"data": {"finetune": {"seed": seed}}}}}
    if metrics is not None:
        data["metrics"] = {"metrics/squad.json": {"data": metrics}}
    return {"revs": [{"rev": "0" * 40, "name": name, "data": data}], "name": name}


def _exp_show(*experiments) -> list[dict]:
    # The shape of `dvc exp show --json` (DVC 3): the workspace, then each baseline with its experiments.
    return [
        {"rev": "workspace", "data": {}},
        {"rev": "a" * 40, "name": "main", "experiments": list(experiments)},
    ]


def test_rows_mean_and_std():
    exp_show = _exp_show(
        _experiment("exp-a", 1, {"exact_match": 80.0, "f1": 88.0}),
        _experiment("exp-b", 2, {"exact_match": 82.0, "f1": 90.0}),
        _experiment("exp-c", 3, None),
    )
    rows = experiment_rows(exp_show, "finetune.seed", "metrics/squad.json")
    assert [(row["name"], row["finetune.seed"]) for row in rows] == [("exp-a", 1), ("exp-b", 2), ("exp-c", 3)]
    table = summarize(rows, "finetune.seed", ("exact_match", "f1"))
    mean_line = next(line for line in table.splitlines() if line.startswith("mean"))
    std_line = next(line for line in table.splitlines() if line.startswith("std"))
    assert "n=2" in mean_line and "81.00" in mean_line and "89.00" in mean_line
    assert "1.41" in std_line  # sample standard deviation of (80, 82) and of (88, 90)
    assert "no metrics" in table


def test_no_finished_experiment_is_a_clear_error():
    rows = experiment_rows(_exp_show(_experiment("exp-a", 1, None)), "finetune.seed", "metrics/squad.json")
    with pytest.raises(UserError, match="no finished experiment"):
        summarize(rows, "finetune.seed", ("f1",))


def test_runs_of_dvc_repro_are_named_as_not_counted():
    """The workspace and the commit hold `dvc repro` results, which are no experiments: the line
    above the table says the table counts experiments only, and names those runs."""
    exp_show = _exp_show(_experiment("exp-a", 1, {"exact_match": 80.0, "f1": 88.0}))
    exp_show[0]["data"] = {"metrics": {"metrics/squad.json": {"data": {"exact_match": 70.0}}}}
    exp_show[1]["data"] = {"metrics": {"metrics/squad.json": {"data": {"exact_match": 71.0}}}}
    rows = experiment_rows(exp_show, "finetune.seed", "metrics/squad.json")
    skipped = skipped_runs(exp_show, "metrics/squad.json")
    assert skipped == ["workspace", "aaaaaaa (main)"]
    line = counted_line(rows, skipped)
    assert line.startswith("Counted: `dvc exp run` experiments of this commit only (1).")
    assert not re.match(r"^\S+\s+[12]\s", line)  # not a row of the table (tests/test_workflow.py reads those)
    assert line.endswith(": workspace, aaaaaaa (main)")
    assert counted_line(rows, []).endswith("only (1).")
