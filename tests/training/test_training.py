import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from bert.errors import UserError
from bert.pretraining.loader import DynamicMasking, PretrainingData
from bert.pretraining.loss import pretraining_objective
from bert.training.checkpoints import list_checkpoints, save_checkpoint
from bert.training.loop import per_row, truncate_live_history
from bert.training.optim import build_optimizer, warmup_poly_schedule, warmup_stable_decay_schedule
from tests.support.loop import run_loop
from tests.support.shard_fixtures import tiny_model, write_shard, write_shards, write_vocab
from tests.support.stage_workspace import REPO

torch.set_num_threads(1)


def pretrain(
    tmp_path,
    shards,
    max_steps,
    total_steps=8,
    workers=0,
    resume=True,
    dropout=0.1,
    objective=pretraining_objective,
    **overrides,
):
    model = tiny_model(seed=0, dropout=dropout)
    optimizer = build_optimizer(model, "lamb", 5e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 2, total_steps, power=0.5)
    data = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=7, num_workers=workers)
    settings = dict(
        max_steps=max_steps,
        save_every=3,
        keep_last=2,
        log_every=2,
        checkpoint_dir=tmp_path / "checkpoints",
        resume=resume,
        seed=3,
        live_dir=tmp_path / "live",
        metrics_file=tmp_path / "metrics.json",
    )
    summary = run_loop(model, data, objective, optimizer, scheduler, **{**settings, **overrides})
    return model, summary


class Accumulated(list):
    """Micro-batches of which `accumulation_steps` make one optimizer step, as the loaders say."""

    def __init__(self, batches: list, accumulation_steps: int):
        super().__init__(batches)
        self.accumulation_steps = accumulation_steps


def test_resume_gives_identical_weights(tmp_path):
    shards = write_shards(tmp_path / "shards")  # 97 rows, 12 batches of 8 per epoch: 16 steps cross an epoch
    straight, _ = pretrain(tmp_path / "straight", shards, 16, total_steps=16, workers=1)
    pretrain(tmp_path / "split", shards, 7, total_steps=16, workers=1)
    # as if killed after logging step 7 but before its checkpoint: resume from step 6
    (tmp_path / "split/checkpoints/step-00000007.pt").unlink()
    resumed, summary = pretrain(tmp_path / "split", shards, 16, total_steps=16, workers=1)
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert summary["steps"] == 16
    assert [p.name for p in list_checkpoints(tmp_path / "split" / "checkpoints")] == [
        "step-00000015.pt",
        "step-00000016.pt",
    ]
    # the resumed run's DVCLive curve has every logged step once
    lines = (tmp_path / "split/live/plots/metrics/train/loss.tsv").read_text().splitlines()
    assert lines[0] == "step\tloss"
    assert [int(line.split("\t")[0]) for line in lines[1:]] == list(range(2, 17, 2))


def loss_curve(live_dir):
    return (live_dir / "plots/metrics/train/loss.tsv").read_text()


def test_fresh_run_clears_the_curves_a_resumed_one_keeps_them(tmp_path):
    shards = write_shards(tmp_path / "shards")
    pretrain(tmp_path, shards, 4)
    first = loss_curve(tmp_path / "live")
    pretrain(tmp_path, shards, 8)  # resumed from step 4: goes on with the curve
    assert loss_curve(tmp_path / "live").startswith(first)
    (tmp_path / "live/plots/metrics/train/stale.tsv").write_text("step\tstale\n99\t1.0\n")
    pretrain(tmp_path, shards, 8, resume=False)  # afresh: the old curves go
    lines = loss_curve(tmp_path / "live").splitlines()
    assert [int(line.split("\t")[0]) for line in lines[1:]] == [2, 4, 6, 8]
    assert not (tmp_path / "live/plots/metrics/train/stale.tsv").exists()


def test_truncate_live_history_keeps_each_step_up_to_the_checkpoint(tmp_path):
    curves = tmp_path / "plots/metrics"
    (curves / "train").mkdir(parents=True)
    (curves / "train/loss.tsv").write_text("step\tloss\n2\t5.0\n4\t4.5\n6\t4.0\n8\t3.5\n")
    (curves / "train/lr.tsv").write_text(
        "timestamp\tstep\tlr\n10\t2\t0.1\n11\t4\t0.2\n12\t6\t0."
    )  # killed mid-row
    (curves / "train/header.tsv").write_text("ste")  # killed while writing the header
    (curves / "train/early.tsv").write_text("step\tearly\n2\t1.0\n")
    before = (curves / "train/early.tsv").stat().st_mtime_ns
    (tmp_path / "metrics.json").write_text('{"train": {"loss": 3.')  # killed while DVCLive rewrote it
    truncate_live_history(tmp_path, 4)
    assert not (tmp_path / "metrics.json").exists()
    assert (curves / "train/loss.tsv").read_text() == "step\tloss\n2\t5.0\n4\t4.5\n"
    assert (curves / "train/lr.tsv").read_text() == "timestamp\tstep\tlr\n10\t2\t0.1\n11\t4\t0.2\n"
    assert not (curves / "train/header.tsv").exists()
    assert (curves / "train/early.tsv").stat().st_mtime_ns == before  # nothing to drop: not rewritten
    truncate_live_history(tmp_path / "missing", 4)  # no curves yet: nothing to do


def test_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog):
    shards = write_shards(tmp_path / "shards")
    straight, _ = pretrain(tmp_path / "straight", shards, 12, total_steps=12)
    pretrain(tmp_path / "split", shards, 8, total_steps=12)  # checkpoints of steps 6 and 8
    newest = tmp_path / "split/checkpoints/step-00000008.pt"
    damaged = newest.read_bytes()[:1000]  # a disk that lied
    newest.write_bytes(damaged)
    caplog.set_level("INFO", logger="bert")
    resumed, _ = pretrain(tmp_path / "split", shards, 12, total_steps=12)
    assert f"{newest}: unreadable (" in caplog.text
    assert "moved aside to step-00000008.pt.corrupt" in caplog.text
    assert "resumed from step 6 " in caplog.text
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert loss_curve(tmp_path / "split/live") == loss_curve(tmp_path / "straight/live")
    # kept aside, outside the glob and the keep-last deletion
    assert (tmp_path / "split/checkpoints/step-00000008.pt.corrupt").read_bytes() == damaged
    assert sorted(p.name for p in (tmp_path / "split/checkpoints").iterdir()) == [
        "step-00000008.pt.corrupt", "step-00000009.pt", "step-00000012.pt",
    ]  # fmt: skip


def test_every_corrupt_checkpoint_is_kept_even_of_one_step(tmp_path):
    """A step whose checkpoint goes bad twice (written again after the first, and damaged again)
    keeps both files: the second used to replace the first, the evidence docs say is never deleted."""
    from bert.training.checkpoints import newest_readable_checkpoint

    for damaged in (b"first", b"second", b"third"):
        (tmp_path / "step-00000008.pt").write_bytes(damaged)
        assert newest_readable_checkpoint(tmp_path, rank=0) is None
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {
        "step-00000008.pt.corrupt": b"first", "step-00000008.pt.2.corrupt": b"second",
        "step-00000008.pt.3.corrupt": b"third",
    }  # fmt: skip
    assert list_checkpoints(tmp_path) == []


def test_no_readable_checkpoint_starts_afresh(tmp_path, caplog):
    shards = write_shards(tmp_path / "shards")
    pretrain(tmp_path, shards, 4)  # checkpoint of step 3 and 4
    for path in list_checkpoints(tmp_path / "checkpoints"):
        path.write_bytes(b"")
    caplog.set_level("INFO", logger="bert")
    _, summary = pretrain(tmp_path, shards, 4)
    assert "no readable checkpoint left; starting afresh" in caplog.text and "resumed from" not in caplog.text
    assert summary["steps"] == 4
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step-00000003.pt", "step-00000003.pt.corrupt", "step-00000004.pt", "step-00000004.pt.corrupt",
    ]  # fmt: skip


def test_logs_and_metrics(tmp_path):
    shards = write_shards(tmp_path / "shards")
    _, summary = pretrain(tmp_path, shards, 8)
    metrics_dir = tmp_path / "live" / "plots" / "metrics" / "train"
    for name in (
        "loss",
        "mlm_loss",
        "nsp_loss",
        "mlm_accuracy",
        "nsp_accuracy",
        "learning_rate",
        "grad_norm",
        "sequences_per_second",
    ):
        assert (metrics_dir / f"{name}.tsv").is_file(), name
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written == pytest.approx(summary)
    for key in (
        "loss",
        "mlm_loss",
        "nsp_loss",
        "mlm_accuracy",
        "nsp_accuracy",
        "first_loss",
        "steps",
        "sequences_per_second",
        "seconds",
        "skipped_steps",
    ):
        assert key in written
    assert written["steps"] == 8 and written["skipped_steps"] == 0
    assert 0 <= written["mlm_accuracy"] <= 1 and 0 <= written["nsp_accuracy"] <= 1
    assert written["loss"] == pytest.approx(written["mlm_loss"] + written["nsp_loss"], rel=1e-5)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    "device, precision",
    [("cpu", "fp32"), *(pytest.param("cuda", p, marks=CUDA) for p in ("fp32", "bf16", "fp16"))],
)
def test_learns_on_repeated_batches(tmp_path, device, precision):
    """The loop really optimises: MLM+NSP loss on a small repeated dataset falls clearly (on a
    GPU also in bf16, and in fp16 with loss scaling)."""
    shards = [write_shard(tmp_path / "one.hdf5", 16, 16, 3, seed=1)]
    model = tiny_model(seed=0, dropout=0.0).to(device)
    optimizer = build_optimizer(model, "lamb", 1e-1, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 5, 80, power=1.0)
    data = PretrainingData(shards, global_batch_size=16, micro_batch_size=16, seed=0)
    summary = run_loop(
        model,
        data,
        pretraining_objective,
        optimizer,
        scheduler,
        max_steps=80,
        log_every=10,
        precision=precision,
    )
    assert summary["loss"] < 0.2 * summary["first_loss"] and summary["mlm_accuracy"] > 0.9
    # fp16: an overflow skips its step and halves the loss scale (4 skips on CPU, same test)
    assert summary["skipped_steps"] < (10 if precision == "fp16" else 1)


class Regression(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def mse(model, batch):
    loss = ((model(batch["x"]) - batch["y"]) ** 2).mean()
    return loss, {"mse": (loss.detach(), 1)}


@pytest.mark.parametrize("optimizer_name", ["lamb", "adamw"])
def test_accumulation_equals_large_batch(optimizer_name):
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 6, generator=generator), torch.randn(32, generator=generator)
    results = []
    for accum, size in [(1, 32), (4, 8)]:
        model = Regression()
        optimizer = build_optimizer(model, optimizer_name, 1e-2, 0.01)
        scheduler = warmup_poly_schedule(optimizer, 0, 1, power=1.0)
        batches = Accumulated(
            [{"x": x[i : i + size], "y": y[i : i + size]} for i in range(0, 32, size)], accum
        )
        run_loop(model, batches, per_row(mse), optimizer, scheduler, max_steps=1, grad_clip=0.1)
        results.append(model.state_dict())
    for name in results[0]:
        torch.testing.assert_close(results[0][name], results[1][name], atol=1e-6, rtol=1e-5)


def test_plain_iterable_resumes_by_replaying(tmp_path):
    generator = torch.Generator().manual_seed(2)
    batches = [
        {"x": torch.randn(4, 6, generator=generator), "y": torch.randn(4, generator=generator)}
        for _ in range(5)
    ]

    def run(steps, folder):
        model = Regression()
        optimizer = build_optimizer(model, "adamw", 1e-2, 0.01)
        scheduler = warmup_poly_schedule(optimizer, 1, 12, power=1.0)
        run_loop(model, batches, per_row(mse), optimizer, scheduler, max_steps=steps, save_every=2,
                 checkpoint_dir=tmp_path / folder)  # fmt: skip
        return model

    straight = run(12, "straight")
    run(7, "split")
    second = run(12, "split")
    for a, b in zip(straight.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b)


def test_nonfinite_loss_stops_with_clear_error_and_keeps_checkpoint(tmp_path):
    calls = {"n": 0}

    def exploding(model, batch):
        calls["n"] += 1
        loss, stats = mse(model, batch)
        return (loss * math.inf if calls["n"] > 4 else loss), stats

    model = Regression()
    optimizer = build_optimizer(model, "lamb", 1e-2, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 0, 20, power=1.0)
    batches = [{"x": torch.randn(4, 6), "y": torch.randn(4)}]
    with pytest.raises(UserError, match=r"were not finite for 3 steps in a row .*step-00000004\.pt"):
        run_loop(model, batches, per_row(exploding), optimizer, scheduler, max_steps=20, save_every=2,
                 max_nonfinite_steps=3, checkpoint_dir=tmp_path)  # fmt: skip
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000002.pt", "step-00000004.pt"]
    assert all(torch.isfinite(p).all() for p in model.parameters())  # skipped updates left it intact


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_runs(tmp_path, precision):
    shards = write_shards(tmp_path / "shards")
    _, summary = pretrain(tmp_path, shards, 4, precision=precision)
    assert math.isfinite(summary["loss"]) and summary["steps"] == 4


def test_signature_change_starts_afresh(tmp_path):
    shards = write_shards(tmp_path / "shards")
    pretrain(tmp_path, shards, 3, description={"run": "a"})
    assert len(list_checkpoints(tmp_path / "checkpoints")) == 1
    _, summary = pretrain(tmp_path, shards, 2, description={"run": "b"})
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["step-00000002.pt"]
    assert summary["steps"] == 2


def test_other_settings_resume_an_unfinished_run_and_train_a_finished_one_again(
    tmp_path, caplog, monkeypatch
):
    """Execution settings (precision, unpad, GPUs, ...) do not change what a run computes, so a
    long run resumes across a switch of them; but a finished run asked again with new settings is
    a new variant (`dvc exp run -S finetune.precision=bf16`): resuming it would train nothing."""
    shards = write_shards(tmp_path / "shards")
    caplog.set_level("INFO", logger="bert.training.loop")
    pretrain(tmp_path, shards, 2)
    _, resumed = pretrain(tmp_path, shards, 4, precision="bf16", execution={"unpad": False})
    assert (
        "resuming a run begun with other settings (precision fp32 -> bf16, unpad None -> False)"
        in caplog.text
    )
    assert "resumed from step 2" in caplog.text and resumed["steps"] == 4

    caplog.clear()  # finished, same settings: resumed, nothing left to train (a crash after the last save)
    _, again = pretrain(tmp_path, shards, 4, precision="bf16", execution={"unpad": False})
    assert "resumed from step 4" in caplog.text and (again["loss"], again["steps"]) == (resumed["loss"], 4)

    caplog.clear()  # finished, other settings: trained again from step 0
    _, other = pretrain(tmp_path, shards, 4, precision="bf16", execution={"unpad": True})
    assert "the run finished with other settings (unpad False -> True); training it again" in caplog.text
    assert "resumed from" not in caplog.text and other["steps"] == 4
    assert other["first_loss"] != resumed["first_loss"]  # the first step ran again, now under bf16
    newest = torch.load(list_checkpoints(tmp_path / "checkpoints")[-1], weights_only=False)
    assert newest["execution"]["unpad"] is True and newest["execution"]["precision"] == "bf16"

    caplog.clear()  # the code changed since (a fix in bert/model/network.py, say): `dvc repro` trains again
    monkeypatch.setattr("bert.training.loop.source_fingerprint", lambda: "edited")
    pretrain(tmp_path, shards, 4, precision="bf16", execution={"unpad": True})
    assert (
        "the run finished with other settings (the code (bert/, stages/)); training it again" in caplog.text
    )


@pytest.mark.parametrize("stage", ["stages.pretrain", "stages.finetune_squad"])
def test_training_stages_import_the_code_their_loop_runs_before_it_starts(stage):
    """source_fingerprint sees the modules imported when training starts: a module the loop
    imported lazily would escape it, and a finished run would not be trained again after its edit."""
    import subprocess
    import sys

    from tests.squad.test_stages import REPO

    script = f"import sys, {stage}; print(sorted(m for m in sys.modules if m.startswith('bert.')))"
    imported = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    loop = [
        "bert.training.binning",
        "bert.training.checkpoints",
        "bert.distributed.launch",
        "bert.model.network",
        "bert.training.optim",
    ]
    loop += ["bert.model.precision", "bert.training.loop"]
    pretraining_only = ["bert.pretraining.masking", "bert.pretraining.loss", "bert.pretraining.loader"]
    if stage == "stages.pretrain":
        loop += pretraining_only
    else:
        loop += ["bert.training.finetune", "bert.squad.objective", "bert.text.tokenization"]
        # an edit of the pretraining code must not rerun fine-tuning (or train a finished run again)
        assert not any(f"'{module}'" in imported for module in pretraining_only), imported
    assert all(f"'{module}'" in imported for module in loop), imported


def test_source_fingerprint_follows_the_project_modules_imported(tmp_path, monkeypatch):
    import sys
    import types

    from bert.training.checkpoints import source_fingerprint

    before = source_fingerprint()
    assert source_fingerprint() == before
    probe = tmp_path / "probe.py"
    probe.write_text("x = 1\n")
    module = types.ModuleType("bert.fingerprint_probe")
    module.__file__ = str(probe)
    monkeypatch.setitem(sys.modules, "bert.fingerprint_probe", module)
    imported = source_fingerprint()
    assert imported != before
    probe.write_text("x = 2\n")
    edited = source_fingerprint()
    assert edited != imported
    monkeypatch.setitem(sys.modules, "elsewhere.probe", types.SimpleNamespace(__file__=str(probe)))
    assert source_fingerprint() == edited  # other packages do not count


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 1, {"w": torch.ones(2)}, keep_last=2)

    def broken_save(obj, file):
        file.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(UserError, match="No space left.*previous checkpoints are intact"):
        save_checkpoint(tmp_path, 2, {"w": torch.ones(2)}, keep_last=2)
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000001.pt"]


@pytest.mark.slow
def test_compile_matches_eager(tmp_path):
    shards = write_shards(tmp_path / "shards")
    # no dropout: compiled kernels draw their random numbers differently from eager ones
    _, eager = pretrain(tmp_path / "eager", shards, 2, log_every=1, dropout=0.0)
    _, compiled = pretrain(tmp_path / "compiled", shards, 2, log_every=1, dropout=0.0, compile=True)
    assert compiled["first_loss"] == pytest.approx(eager["first_loss"], rel=1e-4)
    assert compiled["loss"] == pytest.approx(eager["loss"], rel=1e-4)


# ---------------------------------------------------------------------------------------------
# The loader


def padded(ids, width=16):
    """A batch cut to its longest sequence by the loader, padded back to the shards' width."""
    return torch.nn.functional.pad(ids, (0, width - ids.shape[1]))


def all_rows(data):
    return torch.cat([padded(b["input_ids"]) for b in data])


def test_loader_ranks_split_the_global_batch(tmp_path):
    shards = write_shards(tmp_path)
    whole = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=5)
    halves = [
        PretrainingData(shards, global_batch_size=8, micro_batch_size=4, seed=5, rank=r, world_size=2)
        for r in range(2)
    ]
    assert len(whole) == len(halves[0]) == 97 // 8
    for one, a, b in zip(whole, *halves):
        assert torch.equal(
            padded(one["input_ids"]), torch.cat([padded(a["input_ids"]), padded(b["input_ids"])])
        )
        assert set(one) == {
            "input_ids",
            "token_type_ids",
            "attention_mask",
            "masked_lm_positions",
            "masked_lm_ids",
            "next_sentence_labels",
        }
        assert one["next_sentence_labels"].shape == (8,) and one["input_ids"].dtype == torch.int64


def test_loader_shuffles_shards_per_epoch_and_skips_exactly(tmp_path):
    shards = write_shards(tmp_path)
    data = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=5, num_workers=2)
    epoch0 = all_rows(data)
    data.set_epoch(1)
    epoch1 = all_rows(data)
    assert not torch.equal(epoch0, epoch1)
    assert sorted(map(tuple, epoch0.tolist()))[:5] != []  # same pool of rows, reordered by shard
    data.set_epoch(0)
    assert torch.equal(all_rows(data), epoch0)  # deterministic from (seed, epoch)
    data.skip_samples(24)
    assert torch.equal(all_rows(data), epoch0[24:])
    assert torch.equal(all_rows(data), epoch0)  # the skip applies to one pass only
    with pytest.raises(UserError, match="global batch of 8"):
        data.skip_samples(12)


LOADER_SIGNALLED = """
import os, subprocess, sys, psutil, torch
from pathlib import Path
from bert.pretraining.loader import PretrainingData
data = PretrainingData(sorted(Path(sys.argv[1]).glob("*.hdf5")), 8, 8, seed=5, num_workers=2)
batches = iter(data)
rows = [next(batches)["input_ids"]]
workers = [str(child.pid) for child in psutil.Process().children()]
for name in ("TERM", "USR1"):  # from another process: torchrun's killpg, scancel
    subprocess.run(["kill", "-" + name, *workers], check=True)
rows += [batch["input_ids"] for batch in batches]
print(len(rows), len(workers))
torch.save(rows, sys.argv[2])
kept = iter(data)  # still referenced at exit: the DataLoader's own terminate must end its workers
next(kept)
"""


def test_loader_workers_outlive_a_preemption_signal_and_still_end_with_their_process(tmp_path):
    """SIGTERM / SIGUSR1 to the worker processes (what torchrun and scancel send, besides the rank's
    own, which then checkpoints at its step boundary) neither kill them nor lose a batch; the
    process still exits at once with a loader alive."""
    shards = write_shards(tmp_path / "shards")
    result = subprocess.run(
        [sys.executable, "-c", LOADER_SIGNALLED, str(tmp_path / "shards"), str(tmp_path / "rows.pt")],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["12", "2"]  # 97 rows // 8 batches, 2 workers
    expected = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=5)
    assert torch.equal(
        torch.cat([padded(rows) for rows in torch.load(tmp_path / "rows.pt")]), all_rows(expected)
    )


def test_loader_dynamic_masking(tmp_path):
    pytest.importorskip("bert.pretraining.masking")
    shards = write_shards(tmp_path / "shards", dynamic=True)
    masking = DynamicMasking.from_vocab(write_vocab(tmp_path / "vocab.txt"), 0.15, 3, whole_word_mask=False)
    data = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=5, masking=masking)
    first = next(iter(data))
    assert torch.equal(first["input_ids"], next(iter(data))["input_ids"])  # same (seed, epoch): same masks
    used = first["masked_lm_positions"] != 0
    assert used.any(dim=1).all()
    rows = torch.arange(8)[:, None].expand_as(used)
    original = first["masked_lm_ids"][used]
    assert (original >= 5).all()  # never [CLS]/[SEP]/[PAD]
    data.set_epoch(1)
    assert not torch.equal(first["masked_lm_positions"], next(iter(data))["masked_lm_positions"])
    assert rows.shape == used.shape


def test_loader_rejects_bad_shards(tmp_path):
    import h5py

    bad = tmp_path / "bad.hdf5"
    with h5py.File(bad, "w") as f:
        f.create_dataset("input_ids", data=np.zeros((4, 8), np.int32))
    with pytest.raises(UserError, match=r"bad\.hdf5: not a pretraining shard"):
        PretrainingData([bad], global_batch_size=2, micro_batch_size=2, seed=0)
    with pytest.raises(UserError, match="no pretraining shards"):
        PretrainingData([], global_batch_size=2, micro_batch_size=2, seed=0)
    with pytest.raises(UserError, match="fewer than one global batch"):
        PretrainingData(
            write_shards(tmp_path / "s", sizes=(3,)), global_batch_size=4, micro_batch_size=4, seed=0
        )


def test_save_checkpoint_keeps_the_pre_decay_step_past_keep_last(tmp_path):
    for step in (3, 6, 9, 12):
        save_checkpoint(tmp_path, step, {"step": step}, keep_last=1, keep_step=6)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000006.pt", "step-00000012.pt"]


def wsd_pretrain(directory, shards, max_steps):
    """A warmup-stable-decay run over `max_steps`: warm-up 2 steps, decay over the last quarter
    (the loop's recipe says the same: warmup_proportion 0 there, decay_share 0.25)."""
    start = max_steps - round(0.25 * max_steps)
    model = tiny_model(seed=0, dropout=0.1)
    optimizer = build_optimizer(model, "lamb", 5e-3, 0.01)
    scheduler = warmup_stable_decay_schedule(optimizer, 2, start, max_steps, "1-sqrt")
    data = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=7)
    run_loop(
        model, data, pretraining_objective, optimizer, scheduler, max_steps=max_steps, save_every=5,
        keep_last=1, log_every=2, checkpoint_dir=directory / "checkpoints", seed=3, schedule="wsd",
        decay_share=0.25, live_dir=directory / "live",
    )  # fmt: skip
    return model


def test_extended_wsd_run_goes_on_from_the_pre_decay_checkpoint(tmp_path, caplog):
    shards = write_shards(tmp_path / "shards")
    straight = wsd_pretrain(tmp_path / "straight", shards, 12)  # decays from step 9
    wsd_pretrain(tmp_path / "extended", shards, 8)  # decays from step 6: step 6 kept past keep_last 1
    folder = tmp_path / "extended" / "checkpoints"
    assert [p.name for p in list_checkpoints(folder)] == ["step-00000006.pt", "step-00000008.pt"]
    with caplog.at_level("WARNING"):
        extended = wsd_pretrain(tmp_path / "extended", shards, 12)
    assert "going on from the pre-decay checkpoint" in caplog.text
    # Steps 0-5 ran at the same rates in both runs: from step 6 on, the 12-step run's own.
    for (name, a), b in zip(straight.state_dict().items(), extended.state_dict().values()):
        assert torch.equal(a, b), name
    (aside,) = folder.glob("previous-*-decayed")  # the decayed end moved, not deleted
    assert [p.name for p in list_checkpoints(aside)] == ["step-00000008.pt"]
    assert [p.name for p in list_checkpoints(folder)] == ["step-00000009.pt", "step-00000012.pt"]
    steps = [int(line.split("\t")[0]) for line in loss_curve(tmp_path / "extended" / "live").splitlines()[1:]]
    assert steps == list(range(2, 13, 2))  # the decayed rows after step 6 dropped, logged again
