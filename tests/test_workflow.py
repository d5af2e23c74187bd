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
import time
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


def lock_hashes(lock_text: str) -> dict[str, str]:
    """Output path -> DVC hash, from a dvc.lock's text."""
    lock = yaml.safe_load(lock_text)
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
    run(["git", "tag", "committed"], cwd=path)  # the repository as committed, before the run
    # The whole DAG runs from nothing (forced, and with no dvc.lock: no record of the demo's run).
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
    # Without the committed dvc.lock (the tag keeps it): DVC rereads and rewrites the lock after each
    # stage, and the demo's (62 stages, 8,000 lines) would cost 1.5 s a stage.
    (path / "dvc.lock").unlink()
    result = dvc("repro", "--force", cwd=path)
    assert set(stages_run(result.stdout)) >= {
        *DATA_STAGES,
        "pretrain@phase1",
        "pretrain@phase2",
        "evaluate_squad@v1.1",
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
    # Only `sources` runs (at every repro: it finds the sources unchanged, from its digest cache).
    assert stages_run(second.stdout) == ["sources"]
    assert "didn't change, skipping" in second.stdout and "Updating lock file" not in second.stdout

    set_params(clone, {"predict.n_best_size": 10})
    third = dvc("repro", cwd=clone)
    assert stages_run(third.stdout) == ["sources", "predict_squad@v1.1", "evaluate_squad@v1.1"]
    run(["git", "checkout", "params.yaml", "dvc.lock", "metrics"], cwd=clone)
    dvc("checkout", cwd=clone)


def test_a_run_from_nothing_writes_the_data_the_committed_lock_records(clone):
    """The fixture's `dvc repro --force` built every data output from the sample world alone, in a
    new clone, with one thread a stage: each has the hash the committed dvc.lock records (the demo's,
    run elsewhere with its own thread counts), so anyone's run reproduces them byte for byte."""
    committed = lock_hashes(run(["git", "show", "committed:dvc.lock"], cwd=clone).stdout)
    ours = lock_hashes((clone / "dvc.lock").read_text())
    data_outputs = [
        path
        for path in committed
        if path.startswith(
            ("data/raw", "data/documents", "data/clean", "data/shards", "data/vocab", "data/examples")
        )
    ]
    assert len(data_outputs) >= 10  # raw, documents and shards of both corpora, clean, vocab, examples
    changed = sorted(path for path in data_outputs if ours[path] != committed[path])
    assert not changed, (
        f"{changed}: not the committed bytes (a change to the data stages needs `make demo` and dvc.lock committed)"
    )


def test_an_edited_squad_dev_file_reruns_the_contamination_report_and_never_pretraining(clone):
    """clean.decontaminate: report (the default) keeps pretraining off the evaluation sets."""
    dev = clone / "data/sample/squad/v1.1/dev-v1.1.json"
    original = dev.read_bytes()
    dev.write_bytes(original.replace(b'"question": "', b'"question": "Tell me: ', 1))
    try:
        ran = stages_run(dvc("repro", "eval_texts", cwd=clone).stdout)
        assert {"download_squad@v1.1", "eval_texts"} <= set(ran), ran
        changed = set(json.loads(dvc("status", "--json", cwd=clone).stdout))
        # Fine-tuning reads SQuAD's train file alone: an edited dev file reruns prediction, not training.
        assert {"contamination", "predict_squad@v1.1"} <= changed and "finetune_squad@v1.1" not in changed, (
            changed
        )
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


def test_an_experiment_and_a_queued_one_then_metrics_diff_and_the_seed_study(clone):
    """README's `dvc exp run -S ...` in the foreground, then one queued as a sweep is: DVC's bookkeeping
    of both (exp show, metrics and params diff, exp apply) and the stability summary over the two.
    A quarter epoch each, up to evaluate_squad (the benchmark stage is not rerun): what is tested is
    the bookkeeping, not the spread."""
    dvc("exp", "run", "--name", "seed-1", "-S", "++squad.recipe.seed=1", "-S", "squad.recipe.epochs=0.25",
        "evaluate_squad", cwd=clone)  # fmt: skip
    shown = json.loads(dvc("exp", "show", "--json", cwd=clone).stdout)
    names = [
        rev.get("name")
        for baseline in shown
        for exp in (baseline.get("experiments") or [])
        for rev in exp["revs"]
    ]
    assert "seed-1" in names
    diff = json.loads(dvc("metrics", "diff", "HEAD", "seed-1", "--json", cwd=clone).stdout)
    assert "metrics/squad.json" in diff
    assert {"f1", "exact_match"} <= set(diff["metrics/squad.json"])
    # Every task's measures and the GLUE score are metrics, as `dvc metrics show` lists them.
    shown = json.loads(dvc("metrics", "show", "--json", cwd=clone).stdout)
    files = next(iter(shown.values()))["data"]
    assert {"accuracy_matched", "accuracy_mismatched"} <= set(files["metrics/tasks/mnli.json"]["data"])
    assert 0 <= files["metrics/glue.json"]["data"]["glue_score"] <= 100
    params = json.loads(dvc("params", "diff", "HEAD", "seed-1", "--json", cwd=clone).stdout)
    assert params["params.yaml"]["squad.recipe.seed"]["new"] == 1

    # The workspace back to the commit before queueing (docs/experiments.md), then a one-seed sweep.
    run(["git", "checkout", "."], cwd=clone)
    dvc("exp", "run", "--queue", "--name", "seed-2", "-S", "++squad.recipe.seed=2", "-S", "squad.recipe.epochs=0.25",
        "evaluate_squad", cwd=clone)  # fmt: skip
    dvc("queue", "start", "--jobs", "1", cwd=clone)
    _wait_for_queue(clone, "seed-2")
    summary = run([sys.executable, "-m", "scripts.stability"], cwd=clone)
    lines = summary.stdout.splitlines()
    assert len([line for line in lines if re.match(r"^\S+\s+[12]\s", line)]) == 2, summary.stdout
    assert any(line.startswith("mean") and "n=2" in line for line in lines)
    assert any(line.startswith("std") for line in lines)

    dvc("exp", "apply", "seed-1", cwd=clone)  # the workspace now holds the experiment
    assert yaml.safe_load((clone / "params.yaml").read_text())["squad"]["recipe"]["seed"] == 1
    run(["git", "checkout", "."], cwd=clone)
    dvc("checkout", "--force", cwd=clone)


def _wait_for_queue(clone: Path, name: str, timeout: int = 1800) -> None:
    """Until the queued experiment `name` succeeded (its git ref appears) or failed: one git call a
    second, and `dvc queue status` (a DVC start, 2 s of a core) every 15 s and at the end."""
    for second in range(timeout):
        refs = run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], cwd=clone).stdout.split()
        done = any(ref.endswith(f"/{name}") for ref in refs)
        if done or second % 15 == 14:
            status = dvc("queue", "status", cwd=clone).stdout
            assert "Failed" not in status, status
            if done:
                return
            assert re.search(r"\b(Queued|Running)\b", status), f"the queue ended without {name}:\n{status}"
        time.sleep(1)
    raise AssertionError(f"the experiment queue did not finish {name} in {timeout} s")


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
    status = dvc("status", "--json", cwd=other)
    # Up to date but for the `sources` stage, which runs at every repro.
    assert json.loads(status.stdout) == {"sources": ["always changed"]}, status.stdout
    assert (other / "data/models/squad/model.safetensors").is_file()
    shutil.rmtree(other)
