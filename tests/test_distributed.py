"""DDP on CPU (gloo): 2 ranks == 1 rank at the same global batch; a failing rank fails the job."""

import os
import shutil
import subprocess

import pytest
import torch

from bert.checkpoints import list_checkpoints, load_checkpoint
from bert.distributed import relaunch_under_torchrun, torchrun_command
from bert.errors import UserError
from tests.stage_workspace import REPO, make_workspace, run_stage, set_params


def loss_curve(root, phase="phase1"):
    lines = (root / f"dvclive/pretrain_{phase}/plots/metrics/train/loss.tsv").read_text().splitlines()[1:]
    return [float(line.split("\t")[1]) for line in lines]


def final_weights(root, phase="phase1"):
    return load_checkpoint(list_checkpoints(root / f"data/checkpoints/{phase}")[-1])["model"]


@pytest.mark.slow
def test_two_ranks_match_one_rank_and_resume_across_world_sizes(tmp_path):
    one = make_workspace(tmp_path / "one", nproc=1, batch_size=8)
    two = make_workspace(tmp_path / "two", nproc=2, batch_size=4)
    results = [run_stage(root, "stages.pretrain", "phase1") for root in (one, two)]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    assert "launching" not in results[0].stderr and "--nproc-per-node 2" in results[1].stderr
    curve_one, curve_two = loss_curve(one), loss_curve(two)
    assert len(curve_one) == len(curve_two) == 8
    assert curve_two == pytest.approx(curve_one, rel=1e-5)
    weights_one, weights_two = final_weights(one), final_weights(two)
    assert weights_one.keys() == weights_two.keys()
    for name in weights_one:
        assert weights_one[name].shape == weights_two[name].shape
        torch.testing.assert_close(weights_two[name], weights_one[name], atol=1e-5, rtol=1e-4)

    # resume one rank's step-4 checkpoint on two ranks (same global batch 8 = 2 x 4), the newest
    # one (step 8) being corrupt: rank 0 moves it aside and both ranks resume from step 4
    moved = tmp_path / "moved"
    shutil.copytree(one, moved)
    newest = moved / "data/checkpoints/phase1/step-00000008.pt"
    newest.write_bytes(newest.read_bytes()[:2000])
    set_params(moved, {"distributed.nproc_per_node": 2, "pretrain.phase1.batch_size": 4})
    result = run_stage(moved, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("step-00000008.pt: unreadable") == 1  # rank 0 decides, once
    assert "resumed from step 4" in result.stderr
    assert (moved / "data/checkpoints/phase1/step-00000008.pt.corrupt").exists()
    for name, value in final_weights(moved).items():
        torch.testing.assert_close(value, weights_one[name], atol=1e-5, rtol=1e-4)
    assert loss_curve(moved) == pytest.approx(curve_one, rel=1e-5)


def test_failing_rank_fails_the_whole_job_without_hanging():
    command = torchrun_command(["tests.ddp_worker", "1"], 2, 1, "localhost:29731")
    command.insert(command.index("--nnodes"), "--max-restarts=0")
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180, env=_env())
    assert result.returncode != 0
    assert "rank 1 failed on purpose at step 3" in result.stderr


def test_relaunch_only_when_more_than_one_process_and_a_failed_rank_is_one_clear_error(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert relaunch_under_torchrun(["tests.no_such_module"], 1, 1, "localhost:29732") is False
    monkeypatch.setenv("LOCAL_RANK", "0")  # already one of torchrun's ranks: do the work
    assert relaunch_under_torchrun(["tests.no_such_module"], 2, 1, "localhost:29732") is False
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.chdir(REPO)
    with pytest.raises(
        UserError, match=r"python -m tests.no_such_module failed on at least one rank \(exit status"
    ):
        relaunch_under_torchrun(["tests.no_such_module"], 2, 1, "localhost:29732")


def _env():
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
    }
