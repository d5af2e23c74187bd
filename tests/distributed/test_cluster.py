"""Training that survives a cluster, in the loop and the launcher: old checkpoints moved aside, runs
extended, pre-emption, NCCL settings, apex interop, resume agreement between ranks."""

import dataclasses
import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
from torch import nn

import bert.distributed.launch
from bert.distributed.launch import Execution, relaunch_under_torchrun, setup_distributed, torchrun_command
from bert.errors import UserError, run_main
from bert.model.network import BertForPreTraining
from bert.pretraining.loss import pretraining_loss, pretraining_objective
from bert.training.checkpoints import list_checkpoints, load_checkpoint, run_signature, save_checkpoint
from bert.training.loop import per_row
from bert.training.optim import Lamb, build_optimizer, fit_optimizer_state, warmup_poly_schedule
from tests.support.loop import run_loop
from tests.support.shard_fixtures import tiny_model, write_shards
from tests.support.stage_workspace import REPO
from tests.training.test_training import pretrain

torch.set_num_threads(1)


def test_changed_params_move_the_old_checkpoints_aside_naming_the_change(tmp_path, caplog):
    shards = write_shards(tmp_path / "shards")
    first, second = {"learning_rate": 0.02, "seed": 1}, {"learning_rate": 0.01, "seed": 1}
    a, b = run_signature(first), run_signature(second)
    pretrain(tmp_path, shards, 4, description=first)
    old = {p.name: p.read_bytes() for p in list_checkpoints(tmp_path / "checkpoints")}
    caplog.set_level("INFO", logger="bert.training.checkpoints")
    _, summary = pretrain(tmp_path, shards, 2, description=second)
    aside = tmp_path / f"checkpoints/previous-{a}"
    assert (
        f"written by a run with other params (learning_rate 0.02 -> 0.01); its checkpoints moved to {aside}"
        in caplog.text
    )
    assert {p.name: p.read_bytes() for p in list_checkpoints(aside)} == old  # kept whole, still loadable
    assert load_checkpoint(aside / "step-00000004.pt")["signature"] == a
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["step-00000002.pt"]
    assert summary["steps"] == 2

    # back to the first params: its checkpoints stay where they are; this run's go to a folder of their own
    pretrain(tmp_path, shards, 2, description=first)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()) == [
        f"previous-{a}",
        f"previous-{b}",
    ]
    pretrain(tmp_path, shards, 2, description=first, resume=False)  # resume off: moved too, not deleted
    assert list_checkpoints(tmp_path / f"checkpoints/previous-{a}-2")


def test_keep_last_prunes_only_the_top_folder(tmp_path):
    aside = tmp_path / "previous-x"
    aside.mkdir()
    for step in (1, 2, 3):
        save_checkpoint(aside, step, {"step": step}, keep_last=3)
    for step in (4, 5, 6):
        save_checkpoint(tmp_path, step, {"step": step}, keep_last=1)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000006.pt"]
    assert len(list_checkpoints(aside)) == 3


def test_larger_max_steps_extends_the_run_with_the_schedule_recomputed(tmp_path, caplog):
    shards = write_shards(tmp_path / "shards")
    pretrain(tmp_path, shards, 4, total_steps=4, log_every=1)
    caplog.set_level("INFO")
    _, summary = pretrain(tmp_path, shards, 8, total_steps=8, log_every=1)
    assert (
        "extending the run from step 4: max_steps 4 -> 8, the learning-rate schedule recomputed for 8 steps"
        in caplog.text
    )
    assert "resumed from step 4" in caplog.text and summary["steps"] == 8
    rows = (tmp_path / "live/plots/metrics/train/learning_rate.tsv").read_text().splitlines()[1:]
    rates = {int(step): float(rate) for step, rate in (row.split("\t") for row in rows)}
    # step 5 runs at the new schedule's rate (warm-up 2 of 8), not the old one's (0 after step 4)
    assert rates[5] == pytest.approx(5e-3 * ((8 - 4) / (8 - 2)) ** 0.5)


def test_a_smaller_max_steps_above_the_step_shortens_the_run_and_says_so(tmp_path, caplog):
    from bert.training.checkpoints import checkpoint_to_resume

    save_checkpoint(
        tmp_path, 10, {"step": 10, "max_steps": 120, "signature": "s", "execution": {}}, keep_last=1
    )
    caplog.set_level("INFO", logger="bert.training.checkpoints")
    assert checkpoint_to_resume(tmp_path, "s", {}, 80, resume=True, rank=0)["step"] == 10
    assert (
        "step-00000010.pt: shortening the run at step 10: max_steps 120 -> 80, the learning-rate schedule "
        "recomputed for 80 steps" in caplog.text
    )


def test_the_changes_that_start_a_run_afresh_are_named_readably():
    """Lists of files by the names that changed, sections by their keys, hashes by 12 digits (the
    line used to print the lists' reprs, cut at 40 characters)."""
    from bert.training.checkpoints import _changes

    sha = {name: hashlib.sha256(name.encode()).hexdigest() for name in ("a", "b", "c")}
    before = {"files": [("train.json", sha["a"]), ("model.safetensors", sha["b"]), ("vocab.txt", sha["c"])],
              "shards": [(f"part-{i}.hdf5", 1000) for i in range(6)], "manifest": sha["a"], "init": None,
              "recipe": {"learning_rate": 0.001, "seed": 42}, "squad": [192, 64, 32], "model": "tiny"}  # fmt: skip
    now = {**before, "files": [("train.json", sha["c"]), ("model.safetensors", sha["b"]), ("extra.txt", sha["a"])],
           "shards": [(f"part-{i}.hdf5", 1001) for i in range(6)], "manifest": sha["b"], "init": sha["c"],
           "recipe": {"learning_rate": 0.002, "seed": 42}}  # fmt: skip
    assert _changes(before, now) == ", ".join([
        "files [extra.txt added, train.json changed, vocab.txt removed]",
        f"init changed (sha256 none -> {sha['c'][:12]})",
        f"manifest changed (sha256 {sha['a'][:12]} -> {sha['b'][:12]})",
        "recipe.learning_rate 0.001 -> 0.002",
        "shards [part-0.hdf5 changed, part-1.hdf5 changed, part-2.hdf5 changed, 3 more]",
    ])  # fmt: skip
    assert _changes({"precision": "fp32", "code": "1"}, {"precision": "bf16", "code": "2"}) == (
        "the code (bert/, stages/), precision fp32 -> bf16"
    )


def test_max_steps_below_the_newest_checkpoint_is_one_clear_error(tmp_path):
    shards = write_shards(tmp_path / "shards")
    pretrain(tmp_path, shards, 4, total_steps=4)
    with pytest.raises(
        UserError,
        match=r"step-00000004.pt: the run is at step 4, past max_steps 2.*set max_steps to 4 or more",
    ):
        pretrain(tmp_path, shards, 2, total_steps=2)
    assert len(list_checkpoints(tmp_path / "checkpoints")) == 2  # untouched


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGUSR1"])
def test_preemption_checkpoints_at_the_next_step_and_the_rerun_ends_with_the_same_weights(
    tmp_path, signal_name
):
    shards = write_shards(tmp_path / "shards")
    straight, _ = pretrain(tmp_path / "straight", shards, 8, dropout=0.0, save_every=100)

    def preempted_at_step_3(model, batch):
        if preempted_at_step_3.calls == 2:  # during step 3 (one micro-batch a step)
            os.kill(os.getpid(), getattr(signal, signal_name))
        preempted_at_step_3.calls += 1
        return pretraining_loss(model, batch)

    preempted_at_step_3.calls = 0
    with pytest.raises(
        UserError,
        match=rf"^pre-empted by {signal_name} at step 3 \(checkpoint of step 3 in .*\); run the stage again to resume$",
    ):
        pretrain(
            tmp_path / "split",
            shards,
            8,
            dropout=0.0,
            save_every=100,
            objective=dataclasses.replace(pretraining_objective, loss=preempted_at_step_3),
        )
    assert [p.name for p in list_checkpoints(tmp_path / "split/checkpoints")] == ["step-00000003.pt"]
    assert signal.getsignal(getattr(signal, signal_name)) is signal.SIG_DFL  # handlers restored
    resumed, summary = pretrain(tmp_path / "split", shards, 8, dropout=0.0, save_every=100)
    assert summary["steps"] == 8
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name


def test_join_takes_a_node_rank_of_the_params_nodes():
    from bert.distributed.launch import node_rank_to_join

    assert node_rank_to_join([], 2, "usage") == 0 and node_rank_to_join(["--join", "1"], 2, "usage") == 1
    assert (
        node_rank_to_join(["--join"], 2, "usage") is None
        and node_rank_to_join(["-j", "1"], 2, "usage") is None
        and node_rank_to_join(["--join", "²"], 2, "usage") is None  # isdigit() took it, int() did not
    )
    with pytest.raises(
        UserError,
        match=r"^--join 2: distributed.nnodes is 2 in params.yaml, so the nodes that join are 1 to 1",
    ):
        node_rank_to_join(["--join", "2"], 2, "usage")
    execution = Execution("head.cluster:29500", timeout_minutes=2, max_restarts=3)
    command = torchrun_command(["stages.pretrain", "phase1"], 8, 2, execution, "logs/phase1", node_rank=1)
    assert command[command.index("--node-rank") + 1 :][:7] == [
        "1", "--master-addr", "head.cluster", "--master-port", "29500", "--rdzv-conf", "timeout=120",
    ]  # fmt: skip
    assert command[command.index("--max-restarts") + 1] == "3"
    assert command[command.index("--log-dir") + 1] == "logs/phase1"
    # one node needs no endpoint: a port of its own, so that two runs on one machine never collide
    alone = torchrun_command(["stages.pretrain", "phase1"], 8, 1, execution, "logs")
    assert "--standalone" in alone and "head.cluster" not in " ".join(alone)


def test_execution_settings_come_from_the_environment_with_defaults():
    from bert.distributed.launch import execution_from_environment

    assert execution_from_environment({}) == Execution("localhost:29500", 30.0, 0)
    assert execution_from_environment({"BERT_RDZV_ENDPOINT": ""}) == Execution()  # empty: the default
    given = {
        "BERT_RDZV_ENDPOINT": "node17:29400",
        "BERT_DIST_TIMEOUT_MINUTES": "2.5",
        "BERT_MAX_RESTARTS": "2",
    }
    assert execution_from_environment(given) == Execution("node17:29400", 2.5, 2)
    for name, value, words in [
        ("BERT_RDZV_ENDPOINT", "node17", "BERT_RDZV_ENDPOINT=node17: expected HOST:PORT"),
        ("BERT_RDZV_ENDPOINT", "node17:0", "BERT_RDZV_ENDPOINT=node17:0: expected HOST:PORT"),
        ("BERT_DIST_TIMEOUT_MINUTES", "0", "BERT_DIST_TIMEOUT_MINUTES=0: expected in (0, 1440]"),
        ("BERT_DIST_TIMEOUT_MINUTES", "ten", "BERT_DIST_TIMEOUT_MINUTES=ten: expected in (0, 1440]"),
        ("BERT_MAX_RESTARTS", "1.5", "BERT_MAX_RESTARTS=1.5: expected a whole number 0 to 100"),
        # digits str.isdigit() takes and int() refuses (a traceback), or torchrun would
        ("BERT_RDZV_ENDPOINT", "node17:2950²", "BERT_RDZV_ENDPOINT=node17:2950²: expected HOST:PORT"),
        ("BERT_RDZV_ENDPOINT", "node17:٢٩٥٠٠", "BERT_RDZV_ENDPOINT=node17:٢٩٥٠٠: expected HOST:PORT"),
        ("BERT_RDZV_ENDPOINT", "node 17:29500", "BERT_RDZV_ENDPOINT=node 17:29500: expected HOST:PORT"),
        ("BERT_DIST_TIMEOUT_MINUTES", "٣٠", "BERT_DIST_TIMEOUT_MINUTES=٣٠: expected in (0, 1440]"),
        ("BERT_MAX_RESTARTS", "1\n2", "BERT_MAX_RESTARTS='1\\n2': expected a whole number"),  # one line
    ]:
        with pytest.raises(UserError, match=rf"^{re.escape(words)}"):
            execution_from_environment({name: value})


def test_the_log_folder_is_checked_before_any_work(tmp_path, monkeypatch):
    """BERT_LOG_DIR was read unchecked: a file was a traceback in torchrun, and a folder inside a
    stage's output (the model folder) exited 0 and the publish step wiped the logs it announced."""
    from bert.distributed.launch import execution_from_environment
    from stages.common import layout

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a folder")

    def refusal(value: str | None, run: str = "phase1") -> str:
        environ = {} if value is None else {"BERT_LOG_DIR": value}
        monkeypatch.delenv("BERT_LOG_DIR", raising=False)
        if value is not None:
            monkeypatch.setenv("BERT_LOG_DIR", value)
        with pytest.raises(UserError) as error:
            execution_from_environment(environ, layout.logs(run), layout.OUTPUT_FOLDERS)
        assert "\n" not in str(error.value)
        return str(error.value)

    assert refusal("notes.txt") == (
        "BERT_LOG_DIR=notes.txt: notes.txt is a file, not a folder; point BERT_LOG_DIR at another folder "
        "(it is created when missing)"
    )
    assert refusal("notes.txt/logs").startswith("BERT_LOG_DIR=notes.txt/logs: notes.txt is a file")
    assert refusal("data/models").startswith(
        "BERT_LOG_DIR=data/models: the logs would go to data/models/phase1 (inside data/models), among the "
        "pipeline's outputs (DVC deletes an output before its stage runs"
    )
    assert refusal("data", run="squad").startswith(  # data/phase1 is fine, data/squad is download_squad's
        "BERT_LOG_DIR=data: the logs would go to data/squad, among the pipeline's outputs"
    )
    assert refusal("x" * 300).endswith(
        "a name too long for the file system; point BERT_LOG_DIR at another folder"
    )
    (tmp_path / "data").write_text("")  # the default, data/logs, cannot be made either
    assert refusal(None).startswith("data/logs/phase1 (the ranks' logs; BERT_LOG_DIR unset): data is a file")
    (tmp_path / "data").unlink()
    monkeypatch.setenv("BERT_LOG_DIR", "/tmp/bert-logs")
    execution = execution_from_environment(
        {"BERT_LOG_DIR": "/tmp/bert-logs"}, layout.logs("phase1"), layout.OUTPUT_FOLDERS
    )
    assert execution.log_dir == layout.logs("phase1") == Path("/tmp/bert-logs/phase1")


def test_failure_lines_name_the_rank_host_signal_or_error_and_log():
    from bert.distributed.launch import failure_line

    rank = {"host": "gpu17", "node_rank": 1, "rank": 9, "pid": 77, "exitcode": -9, "signal": "SIGKILL",
            "message": None, "log": "data/logs/phase1/rank9.log", "failed_ranks": [9]}  # fmt: skip
    assert failure_line(rank, 1, "data/logs/phase1") == (
        "rank 9 on gpu17 (node 1, pid 77) died of SIGKILL; its output: data/logs/phase1/rank9.log"
    )
    raised = {**rank, "exitcode": 1, "signal": None, "message": "ValueError: nan", "failed_ranks": [8, 9, 10]}
    assert failure_line(raised, 1, "logs") == (
        "rank 9 on gpu17 (node 1, pid 77) failed: ValueError: nan; its output: data/logs/phase1/rank9.log "
        "(then ranks 8, 10 on this node, logs beside it)"
    )
    assert failure_line({**raised, "message": None, "failed_ranks": [9]}, 1, "logs").endswith(
        "(node 1, pid 77) exited with status 1; its output: data/logs/phase1/rank9.log"
    )
    assert failure_line({"host": "gpu1", "node_rank": 0, "torchrun_signal": "SIGTERM"}, 1, "logs") == (
        "torchrun on gpu1 was stopped by SIGTERM (the ranks' output: logs)"
    )
    assert failure_line(
        {"host": "gpu1", "node_rank": 0, "error": "DistStoreError: timed out"}, 1, "logs"
    ) == ("torchrun on gpu1 failed: DistStoreError: timed out (its log: logs/torchrun-node0.log)")
    assert failure_line(None, 2, "logs") == "torchrun exited with status 2 (its log and the ranks': logs)"


class FakeTorchrun:
    """Stands in for subprocess.Popen(torchrun): records its env and the signals sent to it."""

    def __init__(self, command, env, on_wait=None, status=0):
        self.env, self.signals, self.on_wait, self.status = env, [], on_wait, status

    def send_signal(self, signum):
        self.signals.append(signum)

    def wait(self):
        if self.on_wait:
            self.on_wait()
        return self.status


@pytest.mark.parametrize("user_value", [None, "0"])
def test_launcher_turns_on_nccl_async_error_handling_unless_the_user_set_it(monkeypatch, user_value):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    if user_value is None:
        monkeypatch.delenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", raising=False)
    else:
        monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", user_value)
    started = []
    monkeypatch.setattr(
        bert.distributed.launch.subprocess,
        "Popen",
        lambda command, env: started.append(FakeTorchrun(command, env)) or started[-1],
    )
    assert relaunch_under_torchrun(["stages.pretrain", "phase1"], 2, 1, Execution()) is True
    assert started[0].env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == (user_value or "1")
    # torchrun's own option (PET_): it overwrites TORCHELASTIC_SIGNALS_TO_HANDLE, and died of SIGUSR1
    assert {"SIGTERM", "SIGUSR1"} <= set(started[0].env["PET_SIGNALS_TO_HANDLE"].split(","))


@pytest.mark.parametrize(
    "cpus, nproc_per_node, threads", [(64, 8, 8), (64, 1, 64), (3, 2, 1), (1, 4, 1), (2, 2, 1)]
)
def test_each_rank_gets_its_share_of_the_cpus_of_its_node(monkeypatch, cpus, nproc_per_node, threads):
    monkeypatch.setattr(bert.distributed.launch.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert bert.distributed.launch.threads_per_rank(nproc_per_node) == threads


@pytest.mark.parametrize("user_value, threads", [(None, "auto"), ("3", "auto"), (None, 2), ("3", 2)])
def test_launcher_sets_the_threads_of_the_ranks_unless_the_user_did(monkeypatch, user_value, threads):
    """torchrun itself sets OMP_NUM_THREADS=1 with 2+ ranks a node and nothing with one, so 2 nodes
    x 1 rank and 1 node x 2 ranks computed with other thread counts (and other weights). auto: the
    node's CPUs over its ranks, unless the user set a count; distributed.threads_per_rank N: N on
    every layout, whatever the environment says (dvc.lock records what the ranks computed with)."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(bert.distributed.launch.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(bert.distributed.launch, "wait_for_nodes", lambda *args: None)
    if user_value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", user_value)
    started = []
    monkeypatch.setattr(
        bert.distributed.launch.subprocess,
        "Popen",
        lambda command, env: started.append(FakeTorchrun(command, env)) or started[-1],
    )
    for nproc_per_node, nnodes in [(4, 1), (1, 4)]:
        relaunch_under_torchrun(
            ["stages.pretrain", "phase1"], nproc_per_node, nnodes, Execution(), threads=threads
        )
    expected = [user_value or "4", user_value or "16"] if threads == "auto" else ["2", "2"]
    assert [run.env["OMP_NUM_THREADS"] for run in started] == expected


def test_a_lone_process_computes_on_threads_per_rank_threads(tmp_path, monkeypatch):
    """No torchrun to pass OMP_NUM_THREADS to (one process, or ranks of a torchrun of the user's
    own): the launcher sets torch's thread count itself, before the work."""
    from bert.distributed.launch import launch

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    before, seen = torch.get_num_threads(), []
    try:
        for threads in (2, 1):
            settings = types.SimpleNamespace(
                nproc_per_node=1, nnodes=1, backend="gloo", threads_per_rank=threads
            )
            launch(["x"], [], "x", settings, lambda distributed: seen.append(torch.get_num_threads()),
                   checkpoint_dir=tmp_path, log_dir=tmp_path / "logs")  # fmt: skip
    finally:
        torch.set_num_threads(before)
    assert seen == [2, 1]


def _newest_checkpoint_line(tmp_path, monkeypatch, before: list[int], during: list[int]) -> str:
    """The launcher's line when SIGUSR1 comes while torchrun runs, the checkpoint folder holding the
    steps `before` at the start; the ranks write the steps `during` and fail (pre-empted)."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for step in before:
        save_checkpoint(folder, step, {"step": step}, keep_last=3)
    started = []

    def ranks_preempted():
        os.kill(os.getpid(), signal.SIGUSR1)
        for step in during:
            save_checkpoint(folder, step, {"step": step}, keep_last=3)

    def popen(command, env):
        started.append(FakeTorchrun(command, env, on_wait=ranks_preempted, status=1))
        return started[-1]

    monkeypatch.setattr(bert.distributed.launch.subprocess, "Popen", popen)
    with pytest.raises(UserError) as error:
        relaunch_under_torchrun(["stages.pretrain", "phase1"], 2, 1, Execution(), checkpoint_dir=folder)
    assert started[0].signals == [signal.SIGTERM]  # the signal every torchrun passes on
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL
    return str(error.value)


def test_launcher_passes_a_preemption_signal_on_and_names_the_checkpoint_on_disk(tmp_path, monkeypatch):
    line = _newest_checkpoint_line(tmp_path, monkeypatch, before=[4], during=[7])
    assert line == (
        f"pre-empted (SIGUSR1); the newest checkpoint is step 7 ({tmp_path}/ckpt/step-00000007.pt, "
        "written by this run); run the stage again to resume"
    )


@pytest.mark.parametrize("before", [[], [4]])
def test_launcher_never_claims_a_checkpoint_the_ranks_did_not_write(tmp_path, monkeypatch, before):
    line = _newest_checkpoint_line(tmp_path, monkeypatch, before=before, during=[])
    if before:
        assert line == (
            f"pre-empted (SIGUSR1); the newest checkpoint is step 4 ({tmp_path}/ckpt/step-00000004.pt, "
            "from before this run); run the stage again to resume"
        )
    else:
        assert (
            line
            == f"pre-empted (SIGUSR1); no checkpoint in {tmp_path}/ckpt: running the stage again starts afresh"
        )


def test_a_signal_that_comes_while_torchrun_starts_is_passed_on_once_it_runs(monkeypatch):
    """`dvc` started with SIGTERM ignored (so that it waits for the stage) hands that on: torchrun
    must not inherit it, and a signal before it exists must still reach it."""
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    started, inherited = [], []

    def popen(command, env):
        inherited.append(signal.getsignal(signal.SIGTERM))  # a handler: exec resets it to the default
        os.kill(os.getpid(), signal.SIGTERM)
        started.append(FakeTorchrun(command, env, status=1))
        return started[-1]

    monkeypatch.setattr(bert.distributed.launch.subprocess, "Popen", popen)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with pytest.raises(UserError, match=r"^pre-empted \(SIGTERM\); no checkpoint in "):
            relaunch_under_torchrun(["stages.pretrain", "phase1"], 2, 1, Execution(), checkpoint_dir="none")
        assert inherited[0] not in (signal.SIG_IGN, signal.SIG_DFL)
        assert started[0].signals == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN  # restored
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_command_started_with_the_preemption_signals_ignored_still_stops_on_them():
    seen = []
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        run_main(lambda: seen.extend(signal.getsignal(signum) for signum in previous))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert seen == [signal.SIG_DFL, signal.SIG_DFL]


def test_process_group_gets_the_timeout(monkeypatch):
    seen = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(bert.distributed.launch.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(
        bert.distributed.launch.dist, "init_process_group", lambda backend, **kwargs: seen.update(kwargs)
    )
    monkeypatch.delenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", raising=False)
    setup_distributed("gloo", 12.5)
    assert seen["timeout"].total_seconds() == 12.5 * 60
    assert os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"


def fused_lamb_layout(state: dict) -> dict:
    """An optimizer state as apex's FusedLAMB keeps it: the step count in each param group."""
    groups = []
    for group in state["param_groups"]:
        steps = {state["state"][i]["step"] for i in group["params"] if i in state["state"]}
        groups.append({**group, "step": steps.pop(), "bias_correction": True, "grad_averaging": True,
                       "max_grad_norm": float("inf"), "use_nvlamb": True})  # fmt: skip
    per_param = {i: {k: v for k, v in values.items() if k != "step"} for i, values in state["state"].items()}
    return {"state": per_param, "param_groups": groups}


def test_optimizer_state_converts_from_fused_lamb_and_back():
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    optimizer = build_optimizer(model, "lamb", 1e-2, 0.01)
    for _ in range(3):
        model(torch.randn(3, 4)).pow(2).sum().backward()
        optimizer.step()
    ours = optimizer.state_dict()

    # FusedLAMB's layout into our Lamb: the per-parameter step comes back
    fitted = fit_optimizer_state(fused_lamb_layout(ours), optimizer)
    assert all(values["step"] == 3 for values in fitted["state"].values()) and len(fitted["state"]) == 4
    assert all("step" not in group for group in fitted["param_groups"])

    # ours into FusedLAMB's layout: one step per group, its own settings filled in from the optimizer
    class FusedLAMB(torch.optim.Optimizer):  # apex's class by name, with its defaults
        def __init__(self, params):
            super().__init__(params, {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01,
                                      "bias_correction": True, "grad_averaging": True,
                                      "max_grad_norm": float("inf"), "use_nvlamb": True})  # fmt: skip

    from bert.training.optim import parameter_groups

    fused = FusedLAMB(parameter_groups(model, 0.01))
    to_fused = fit_optimizer_state(ours, fused)
    assert [group["step"] for group in to_fused["param_groups"]] == [3, 3]
    assert all("step" not in values for values in to_fused["state"].values())
    assert all(group["use_nvlamb"] is True for group in to_fused["param_groups"])
    fused.load_state_dict(to_fused)
    assert fused.param_groups[0]["step"] == 3 and fused.param_groups[0]["lr"] == 1e-2


def test_resume_through_fused_lamb_layout_matches_the_uninterrupted_run():
    torch.manual_seed(0)
    data = [torch.randn(3, 4, generator=torch.Generator().manual_seed(s)) for s in range(5)]

    def run(model, optimizer, batches):
        for x in batches:
            model(x).pow(2).sum().backward()
            optimizer.step()
            optimizer.zero_grad()

    def fresh():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        return model, build_optimizer(model, "lamb", 1e-2, 0.01)

    straight, straight_optimizer = fresh()
    run(straight, straight_optimizer, data)
    first, first_optimizer = fresh()
    run(first, first_optimizer, data[:3])
    saved_state = fused_lamb_layout(first_optimizer.state_dict())  # as a FusedLAMB run would have saved it
    second, second_optimizer = fresh()
    second.load_state_dict(first.state_dict())
    second_optimizer.load_state_dict(fit_optimizer_state(saved_state, second_optimizer))
    run(second, second_optimizer, data[3:])
    for a, b in zip(straight.parameters(), second.parameters()):
        assert torch.equal(a, b)


def test_apex_that_fails_to_build_falls_back_with_one_line(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("apex was built without its CUDA extensions")

    apex = types.ModuleType("apex")
    apex.optimizers = types.ModuleType("apex.optimizers")
    apex.normalization = types.ModuleType("apex.normalization")
    apex.optimizers.FusedLAMB = broken
    apex.normalization.FusedLayerNorm = broken
    for name, module in {
        "apex": apex,
        "apex.optimizers": apex.optimizers,
        "apex.normalization": apex.normalization,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr("bert.model.network._APEX_REPORTED", set())
    with caplog.at_level(logging.INFO):
        model = tiny_model()
        model = BertForPreTraining(model.config, apex_layer_norm=True)
        optimizer = build_optimizer(model, "lamb", 1e-3, 0.01, use_apex=True)
    assert isinstance(optimizer, Lamb)
    assert all(isinstance(m, nn.LayerNorm) for m in model.modules() if "Norm" in type(m).__name__)
    lines = [r.getMessage() for r in caplog.records]
    assert (
        sum("FusedLayerNorm is not usable (RuntimeError: apex was built without" in line for line in lines)
        == 1
    )
    assert sum("FusedLAMB is not usable (RuntimeError: apex was built without" in line for line in lines) == 1


def test_ranks_that_cannot_read_rank_0s_checkpoint_stop_the_job_naming_it(tmp_path):
    """Three ranks, each in its own folder (three nodes without a shared filesystem): rank 1 has no
    copy of the checkpoint rank 0 resumes, rank 2 another one."""
    folders = [tmp_path / f"node{rank}" for rank in range(3)]
    for folder in folders:
        folder.mkdir()
    model = nn.Linear(4, 1)
    optimizer = build_optimizer(model, "adamw", 1e-2, 0.0)
    square = per_row(lambda m, b: (m(b["x"]).pow(2).mean(), {}))
    scheduler = warmup_poly_schedule(optimizer, 0, 4, power=1.0)
    run_loop(model, [{"x": torch.randn(2, 4)}], square, optimizer, scheduler, max_steps=2, save_every=2,
             checkpoint_dir=folders[0] / "ckpt")  # fmt: skip
    (folders[2] / "ckpt").mkdir()
    (folders[2] / "ckpt/step-00000002.pt").write_bytes(b"another file")
    command = torchrun_command(
        ["tests.support.resume_worker", *map(str, folders)], 3, 1, Execution(), tmp_path / "logs"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode != 0
    output = result.stderr + "".join(p.read_text() for p in (tmp_path / "logs").glob("rank*.log"))
    assert (
        "error: ckpt/step-00000002.pt: rank 0 resumes from it (step 2) but on rank 1 it is missing, "
        "on rank 2 it holds other bytes" in output
    ), output[-3000:]
    assert "the checkpoint folder must be one filesystem that every node shares" in output


def test_a_signal_to_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    logs = tmp_path / "logs"
    command = torchrun_command(["tests.support.preempt_worker", str(tmp_path)], 2, 1, Execution(), logs)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode != 0
    rank1 = (logs / "rank1.log").read_text()
    assert f"error: pre-empted by SIGUSR1 at step 3 (checkpoint of step 3 in {tmp_path})" in rank1, rank1
    assert "error: pre-empted by a signal to another rank at step 3" in result.stderr, result.stderr[-3000:]
    assert "error: pre-empted by a signal to another rank at step 3" in (logs / "rank0.log").read_text()
    (checkpoint,) = list_checkpoints(tmp_path)
    state = load_checkpoint(checkpoint)
    assert state["step"] == 3 and len(state["rng"]) == 2


def test_set_params_writes_the_job_into_params_yaml_keeping_its_layout_or_changes_nothing(tmp_path):
    from scripts.set_params import set_params
    from stages.common.params import load_params

    path = tmp_path / "params.yaml"
    original = (REPO / "params.yaml").read_text()
    path.write_text(original)
    set_params(path, ["distributed.nnodes=1", "distributed.nproc_per_node=1"])  # the values it holds
    assert path.read_text() == original
    set_params(path, ["distributed.nnodes=4", "distributed.nproc_per_node=8"])
    params = load_params(path)
    assert params.distributed.nnodes == 4 and params.distributed.nproc_per_node == 8
    changed = [(a, b) for a, b in zip(original.splitlines(), path.read_text().splitlines()) if a != b]
    assert changed == [("  nproc_per_node: 1", "  nproc_per_node: 8"), ("  nnodes: 1", "  nnodes: 4")]
    assert len(path.read_text().splitlines()) == len(
        original.splitlines()
    )  # comments, nulls, long lines kept
    before = path.read_bytes()
    for assignments, words in [
        (["distributed.nodes=2"], "distributed.nodes is not a key of params.yaml"),
        (["cluster.nnodes=2"], "there is no section 'cluster'"),
        (["distributed.nnodes=0"], "distributed.nnodes is 0"),
        (["distributed.nnodes"], "expected SECTION.KEY=VALUE"),
        # a -S-style value that is not YAML was a traceback (yaml's, or its constructors' ValueError)
        (
            ["distributed.nnodes=[1"],
            r"^distributed.nnodes=\[1: not valid YAML at line 1, column 3: .*; write a YAML",
        ),
        (
            ["seed=!!int x"],
            r"^seed=!!int x: not valid YAML at line 1, column 1: 'x' is not a valid !!int; write",
        ),
        (
            ["seed=\x1f\n"],
            r"^seed='\\x1f\\n': not valid YAML: unacceptable character #x001f",
        ),  # found by fuzzing
        ([], "usage: python -m scripts.set_params"),
    ]:
        with pytest.raises(UserError, match=words):
            set_params(path, assignments)
        assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name != "params.yaml"]  # no temporaries left


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_rendezvous_says_who_joined_and_times_out_with_the_fix_on_both_sides(monkeypatch, caplog):
    """On 127.0.0.1, a timeout of 1.2 s and a report every 0.3 s: a head whose node 1 never comes
    names it and its command; a node that finds no head says the head runs `dvc repro`; a head and
    a node that both come meet and free the port for torchrun."""
    import socket
    import threading

    from bert.distributed.launch import wait_for_nodes

    monkeypatch.setattr(bert.distributed.launch, "REPORT_EVERY_SECONDS", 0.3)
    caplog.set_level("INFO", logger="bert.distributed.launch")
    endpoint = f"127.0.0.1:{_free_port()}"
    quick = Execution(endpoint, timeout_minutes=0.02)
    with pytest.raises(UserError) as raised:
        wait_for_nodes(quick, 2, 0, "python -m stages.pretrain phase1")
    host = socket.gethostname()
    assert str(raised.value) == (
        f"rendezvous at {endpoint}: 1 of 2 nodes joined (node 0 on {host}); node 1 did not join within "
        "0.02 minutes (BERT_DIST_TIMEOUT_MINUTES): on each of them run `python -m stages.pretrain phase1 "
        f"--join N` (N its node rank) with BERT_RDZV_ENDPOINT={endpoint}, and `dvc repro` on the head only"
    )
    assert (
        f"rendezvous at {endpoint}: 1 of 2 nodes joined (node 0 on {host}); waiting for node 1" in caplog.text
    )

    with pytest.raises(UserError) as raised:
        wait_for_nodes(quick, 2, 1, "python -m stages.pretrain phase1")
    assert str(raised.value).startswith(
        f"rendezvous at {endpoint}: no head node answered within 0.02 minutes (BERT_DIST_TIMEOUT_MINUTES): "
        "the head node (node 0) must run the stage, with `dvc repro`, and this node joins it"
    )

    errors = []
    node = threading.Thread(
        target=lambda: _catch(errors, wait_for_nodes, Execution(endpoint, 0.5), 2, 1, "x")
    )
    node.start()
    wait_for_nodes(Execution(endpoint, 0.5), 2, 0, "x")
    node.join()
    assert not errors
    assert (
        f"rendezvous at {endpoint}: 2 of 2 nodes joined (node 0 on {host}, node 1 on {host})" in caplog.text
    )
    with socket.socket() as again:  # the port is free again for torchrun's own rendezvous
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", int(endpoint.rpartition(":")[2])))


def _catch(errors, function, *args):
    try:
        function(*args)
    except Exception as error:
        errors.append(error)


def test_a_preempted_rank_names_the_checkpoint_the_disk_holds(tmp_path):
    """A step whose loss was not finite is not saved: the line names the newest one instead."""
    from bert.training.loop import _Preemption

    preemption = _Preemption()
    preemption.received = "SIGTERM"
    assert str(preemption.error(3, tmp_path)) == (
        "pre-empted by SIGTERM at step 3 (no checkpoint written); run the stage again to resume"
    )
    save_checkpoint(tmp_path, 4, {"step": 4}, keep_last=2)
    assert str(preemption.error(6, tmp_path)) == (
        f"pre-empted by SIGTERM at step 6 (no checkpoint of it; the newest is step 4 in {tmp_path}); "
        "run the stage again to resume"
    )
    assert str(preemption.error(4, tmp_path)).startswith(
        f"pre-empted by SIGTERM at step 4 (checkpoint of step 4 in {tmp_path})"
    )
