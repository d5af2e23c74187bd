"""DDP on CPU (gloo): 2 ranks == 1 rank at the same global batch; a failing rank fails the job."""

import os
import re
import shutil
import socket
import subprocess

import pytest
import torch

from bert.distributed.launch import Execution, relaunch_under_torchrun, torchrun_command
from bert.errors import UserError
from bert.pretraining.loader import PretrainingData
from bert.training.checkpoints import list_checkpoints, load_checkpoint
from tests.support.ddp_train_worker import train_tiny
from tests.support.shard_fixtures import write_shards
from tests.support.stage_workspace import REPO, make_workspace, run_stage, set_params


def loss_curve(root, phase="phase1"):
    lines = (root / f"dvclive/pretrain_{phase}/plots/metrics/train/loss.tsv").read_text().splitlines()[1:]
    return [float(line.split("\t")[1]) for line in lines]


def final_weights(root, phase="phase1"):
    return load_checkpoint(list_checkpoints(root / f"data/checkpoints/{phase}")[-1])["model"]


@pytest.mark.slow
def test_two_ranks_match_one_rank_and_resume_across_world_sizes(tmp_path):
    """Global batch 8, length binning on, masks drawn as the examples stage draws them."""
    one = make_workspace(tmp_path / "one", nproc=1, micro_batch_size=8)
    two = make_workspace(tmp_path / "two", nproc=2, micro_batch_size=4)
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
    set_params(moved, {"distributed.nproc_per_node": 2, "pretrain.phase1.micro_batch_size": 4})
    result = run_stage(moved, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("step-00000008.pt: unreadable") == 1  # rank 0 decides, once
    assert "resumed from step 4" in result.stderr
    assert (moved / "data/checkpoints/phase1/step-00000008.pt.corrupt").exists()
    for name, value in final_weights(moved).items():
        torch.testing.assert_close(value, weights_one[name], atol=1e-5, rtol=1e-4)
    assert loss_curve(moved) == pytest.approx(curve_one, rel=1e-5)

    # and the other way: the two ranks' step-4 checkpoint on one rank, 4 x 2 accumulation steps
    back = tmp_path / "back"
    shutil.copytree(two, back)
    (back / "data/checkpoints/phase1/step-00000008.pt").unlink()
    set_params(back, {"distributed.nproc_per_node": 1, "pretrain.phase1.micro_batch_size": 4})
    result = run_stage(back, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "resumed from step 4" in result.stderr and "global batch 8 = 4 x 2 accum x 1 ranks" in result.stderr
    )
    for name, value in final_weights(back).items():
        torch.testing.assert_close(value, weights_one[name], atol=1e-5, rtol=1e-4)
    assert loss_curve(back) == pytest.approx(curve_one, rel=1e-5)


def test_token_weighted_loss_makes_two_ranks_and_accumulation_equal_one_big_batch(tmp_path):
    """Masks drawn as the examples stage draws them: rows mask 1 to 5 tokens, so the halves of a
    global batch hold different numbers of masked tokens. The MLM loss of a step is the mean over
    all of them whatever the split: 1 x 16 == 1 x 8 x 2 accumulation == 2 ranks x 8 == 2 x 4 x 2."""
    folder = tmp_path / "shards"
    shards = write_shards(folder, sizes=(40, 33), seq_len=32, max_pred=5, min_length=6, drawn_masks=True)
    halves = PretrainingData(shards, 16, 8, seed=3, length_binning=True)
    counts = [int((batch["masked_lm_positions"] != 0).sum()) for batch in halves]
    assert any(a != b for a, b in zip(counts[::2], counts[1::2]))  # a per-half mean would differ

    command = torchrun_command(
        ["tests.support.ddp_train_worker", str(folder), "16", "8", str(tmp_path / "2x8.pt"), "4", str(tmp_path / "2x4x2.pt")],
        2, 1, Execution(), tmp_path / "logs",
    )  # fmt: skip
    ranks = subprocess.Popen(
        command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    reference, reference_summary = train_tiny(shards, 16, 16)  # meanwhile, in this process
    results = {"1x8x2": train_tiny(shards, 16, 8)}
    _, stderr = ranks.communicate(timeout=240)
    assert ranks.returncode == 0, stderr[-3000:]
    for name in ("2x8", "2x4x2"):
        saved = torch.load(tmp_path / f"{name}.pt", weights_only=False)
        results[name] = saved["weights"], saved["summary"]
    for name, (weights, summary) in results.items():
        for key in ("first_loss", "loss", "mlm_loss", "nsp_loss", "mlm_accuracy"):
            assert summary[key] == pytest.approx(reference_summary[key], rel=1e-6), (name, key)
        for key, value in reference.items():
            torch.testing.assert_close(weights[key], value, atol=1e-6, rtol=1e-5, msg=f"{name} {key}")
        # the throughput figures are of all ranks together: the same real tokens and model FLOPs
        for key in ("tokens_per_second", "model_tflops_per_second"):
            work = summary[key] * summary["seconds"]
            assert work == pytest.approx(reference_summary[key] * reference_summary["seconds"], rel=1e-9), (
                name,
                key,
            )
        assert 0 <= summary["data_wait_share"] <= 1
    # the logged loss is its terms' sum, each a mean over all its items of the step (log_every 1)
    assert reference_summary["loss"] == pytest.approx(
        reference_summary["mlm_loss"] + reference_summary["nsp_loss"]
    )


def test_a_failing_rank_fails_the_job_with_one_line_naming_it_and_its_log(tmp_path, monkeypatch):
    """Through the launcher, as a stage: rank 1 raises at step 3; the job ends (rank 0 does not
    hang), and the last line names the rank, its host, its error and its log file, which holds
    the traceback; torchrun's own report goes to its log, not the console."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert relaunch_under_torchrun(["tests.no_such_module"], 1, 1, Execution()) is False
    monkeypatch.setenv("LOCAL_RANK", "0")  # already one of torchrun's ranks: do the work
    assert relaunch_under_torchrun(["tests.no_such_module"], 2, 1, Execution()) is False
    monkeypatch.delenv("LOCAL_RANK")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    logs = tmp_path / "logs"
    with pytest.raises(UserError) as raised:
        relaunch_under_torchrun(["tests.support.ddp_worker", "1"], 2, 1, Execution(), log_dir=logs)
    assert re.fullmatch(
        rf"python -m tests.support.ddp_worker 1 failed: rank 1 on {socket.gethostname()} \(node 0, pid \d+\) "
        rf"failed: RuntimeError: rank 1 failed on purpose at step 3; its output: {logs}/rank1.log"
        r" \(then rank 0 on this node, logs beside it\)",
        str(raised.value),
    ), str(raised.value)
    rank1 = (logs / "rank1.log").read_text()
    assert "Traceback" in rank1 and "RuntimeError: rank 1 failed on purpose at step 3" in rank1
    assert "ChildFailedError" not in (logs / "torchrun-node0.log").read_text() + rank1


def _env():
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
    }
