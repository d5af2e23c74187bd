"""The product used the way its users use it: `dvc repro`, `dvc exp run`, `dvc metrics diff`,
`dvc plots diff`, `dvc push`/`pull`, on the sample world, in a fresh clone of this repository.

Slow (the whole DAG runs on a CPU): marked `slow`, run by `make test` and CI.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.stage_workspace import set_params

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DATA_STAGES = [
    "download@wikipedia",
    "download@bookcorpus",
    "documents@wikipedia",
    "documents@bookcorpus",
    "clean",
    "shard@wikipedia",
    "shard@bookcorpus",
    "vocab",
    "examples@phase1",
    "examples@phase2",
]


TASK_STAGES = ["download_task", "finetune_task", "predict_task", "evaluate_task"]


def run(args: list[str], cwd: Path, check: bool = True, timeout: int = 1200) -> subprocess.CompletedProcess:
    # One OpenMP thread per stage process: the other pytest worker has the second core, and torch's
    # threads spin-waiting for a busy core cost 2-4x the CPU time (the outputs do not depend on it:
    # `cpu_threads` is a metric, and the data stages are byte-identical for any thread count).
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def dvc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return run([str(BIN / "dvc"), *args], cwd=cwd, check=check)


def stages_run(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def lock_hashes(clone: Path) -> dict[str, str]:
    """Output path -> DVC hash, from dvc.lock."""
    lock = yaml.safe_load((clone / "dvc.lock").read_text())
    return {
        out["path"]: out.get("md5", "") for stage in lock["stages"].values() for out in stage.get("outs", [])
    }


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone of the committed repository after one full `dvc repro`."""
    path = tmp_path_factory.mktemp("workflow") / "bert-dvc"
    run(["git", "clone", "--quiet", str(REPO), str(path)], cwd=path.parent)
    run(["git", "config", "user.email", "ci@example.com"], cwd=path)
    run(["git", "config", "user.name", "CI"], cwd=path)
    # The committed dvc.lock describes the demo run; forcing shows the whole DAG runs from nothing.
    # Shorter training than the demo's (what is tested here is DVC's handling of the DAG, not the
    # model): 200 phase-1 steps, half a SQuAD epoch, and one epoch of one task of each kind
    # (multiple choice, classes over two dev splits, a score) instead of three of all nine.
    set_params(
        path,
        {
            "pretrain.phase1.max_steps": 200,
            "squad.recipe.epochs": 0.5,
            "finetune.recipe.epochs": 1,
            "tasks.run": dict.fromkeys(["swag", "mnli", "stsb"], "finetune.init"),
        },
    )
    result = dvc("repro", "--force", cwd=path)
    assert set(stages_run(result.stdout)) >= {
        *DATA_STAGES,
        "pretrain@phase1",
        "pretrain@phase2",
        "evaluate_squad",
        *(f"{stage}@{task}" for stage in TASK_STAGES for task in ("swag", "mnli", "stsb")),
        "glue_score",
    }
    run(["git", "add", "-A"], cwd=path)
    run(["git", "commit", "--quiet", "-m", "demo run"], cwd=path)
    return path


def test_repro_is_complete_then_a_noop_then_reruns_exactly_the_dependents(clone):
    squad = json.loads((clone / "metrics/squad.json").read_text())
    assert 0 <= squad["exact_match"] <= squad["f1"] <= 100
    phase1, phase2 = (
        json.loads((clone / f"metrics/pretrain_{phase}.json").read_text()) for phase in ("phase1", "phase2")
    )
    assert phase1["loss"] < phase1["first_loss"] - 1, "phase 1: the loss did not fall"
    # Phase 2 goes on from phase 1's weights (its 60 steps after only 200 of phase 1 are too few
    # for its own loss to fall beyond noise).
    assert phase2["first_loss"] < phase1["first_loss"] - 1 and math.isfinite(phase2["loss"])
    second = dvc("repro", cwd=clone)
    assert stages_run(second.stdout) == []
    assert "up to date" in second.stdout.lower()

    set_params(clone, {"predict.n_best_size": 10})
    third = dvc("repro", cwd=clone)
    assert stages_run(third.stdout) == ["predict_squad", "evaluate_squad"]
    run(["git", "checkout", "params.yaml", "dvc.lock", "metrics"], cwd=clone)
    dvc("checkout", cwd=clone)


def test_data_stages_are_byte_identical_when_forced(clone):
    before = lock_hashes(clone)
    forced = dvc("repro", "--force", "--single-item", *DATA_STAGES, cwd=clone)  # one DVC start, not nine
    assert sorted(stages_run(forced.stdout)) == sorted(DATA_STAGES)
    after = lock_hashes(clone)
    data_outputs = [
        path
        for path in before
        if path.startswith(
            ("data/raw", "data/documents", "data/clean", "data/shards", "data/vocab", "data/examples")
        )
    ]
    assert data_outputs
    assert {path: after[path] for path in data_outputs} == {path: before[path] for path in data_outputs}


def test_an_edited_squad_dev_file_reruns_the_contamination_report_and_never_pretraining(clone):
    """clean.decontaminate: report (the default) keeps pretraining off the evaluation sets."""
    dev = clone / "data/sample/squad/v1.1/dev-v1.1.json"
    original = dev.read_bytes()
    dev.write_bytes(original.replace(b'"question": "', b'"question": "Tell me: ', 1))
    try:
        ran = stages_run(dvc("repro", "eval_texts", cwd=clone).stdout)
        assert {"download_squad", "eval_texts"} <= set(ran), ran
        changed = set(json.loads(dvc("status", "--json", cwd=clone).stdout))
        assert {"contamination", "finetune_squad"} <= changed, changed
        pretraining = {
            "clean",
            "shard@wikipedia",
            "vocab",
            "examples@phase1",
            "pretrain@phase1",
            "pretrain@phase2",
        }
        assert not changed & pretraining, changed
    finally:
        dev.write_bytes(original)
        run(["git", "checkout", "dvc.lock", "metrics"], cwd=clone)
        dvc("checkout", cwd=clone)


def test_experiment_then_metrics_diff(clone):
    # a quarter epoch, up to evaluate_squad (as README's `dvc exp run ... evaluate_squad`; the
    # benchmark stage is not rerun): what is tested is DVC's bookkeeping of the experiment, not its F1
    dvc("exp", "run", "--name", "lr-6e-5", "-S", "squad.recipe.learning_rate=6e-5", "-S", "squad.recipe.epochs=0.25",
        "evaluate_squad", cwd=clone)  # fmt: skip
    shown = json.loads(dvc("exp", "show", "--json", cwd=clone).stdout)
    names = [
        rev.get("name")
        for baseline in shown
        for exp in (baseline.get("experiments") or [])
        for rev in exp["revs"]
    ]
    assert "lr-6e-5" in names
    diff = json.loads(dvc("metrics", "diff", "HEAD", "lr-6e-5", "--json", cwd=clone).stdout)
    assert "metrics/squad.json" in diff
    assert {"f1", "exact_match"} <= set(diff["metrics/squad.json"])
    # Every task's measures and the GLUE score are metrics, as `dvc metrics show` lists them.
    shown = json.loads(dvc("metrics", "show", "--json", cwd=clone).stdout)
    files = next(iter(shown.values()))["data"]
    assert {"accuracy_matched", "accuracy_mismatched"} <= set(files["metrics/tasks/mnli.json"]["data"])
    assert 0 <= files["metrics/glue.json"]["data"]["glue_score"] <= 100
    params = json.loads(dvc("params", "diff", "HEAD", "lr-6e-5", "--json", cwd=clone).stdout)
    assert params["params.yaml"]["squad.recipe.learning_rate"]["new"] == pytest.approx(6e-5)
    dvc("exp", "apply", "lr-6e-5", cwd=clone)  # the workspace now holds the experiment
    run(["git", "checkout", "."], cwd=clone)
    dvc("checkout", "--force", cwd=clone)


def test_queued_sweep_and_seed_study(clone):
    dvc("exp", "remove", "--all-commits", cwd=clone)  # the study covers these two experiments only
    # two seeds, a quarter epoch each: what is tested is the queue and the summary, not the spread
    dvc("exp", "run", "--queue", "-S", "++squad.recipe.seed=1,2", "-S", "squad.recipe.epochs=0.25", "evaluate_squad",
        cwd=clone)  # fmt: skip
    dvc("queue", "start", "--jobs", "1", cwd=clone)
    _wait_for_queue(clone)
    summary = run([sys.executable, "-m", "scripts.stability"], cwd=clone)
    lines = summary.stdout.splitlines()
    assert len([line for line in lines if re.match(r"^\S+\s+[12]\s", line)]) == 2, summary.stdout
    assert any(line.startswith("mean") and "n=2" in line for line in lines)
    assert any(line.startswith("std") for line in lines)


def _wait_for_queue(clone: Path, timeout: float = 1800) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = dvc("queue", "status", cwd=clone).stdout
        if not re.search(r"\b(Queued|Running)\b", status):
            assert "Failed" not in status, status
            return
        time.sleep(1)
    raise AssertionError("the experiment queue did not finish in time")


def test_plots_diff_draws_loss_curves(clone):
    out = clone / "plots-out"
    dvc("plots", "diff", "HEAD", "--out", str(out), cwd=clone)
    html = (out / "index.html").read_text()
    assert "Pretraining loss (phase 1)" in html
    assert "SQuAD fine-tuning loss" in html
    assert "Real tokens per second" in html and "MFU (model FLOP/s over the device" in html  # bert.throughput


def test_push_then_pull_in_a_fresh_clone(clone, tmp_path):
    remote = tmp_path / "remote"
    dvc("remote", "add", "--local", "-d", "demo", str(remote), cwd=clone)
    dvc("push", cwd=clone)
    other = tmp_path / "other"
    run(["git", "clone", "--quiet", str(clone), str(other)], cwd=tmp_path)
    dvc("remote", "add", "--local", "-d", "demo", str(remote), cwd=other)
    dvc("pull", cwd=other)
    status = dvc("status", cwd=other)
    assert "up to date" in status.stdout.lower(), status.stdout
    assert (other / "data/models/squad/model.safetensors").is_file()
    shutil.rmtree(other)
