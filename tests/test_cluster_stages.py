"""The pretraining stage as a cluster uses it, in a throw-away project: changed params keep the old
checkpoints, a larger max_steps extends the run, SIGTERM pre-empts 2 ranks and the re-run resumes;
every way a pre-emption signal arrives (to torchrun, to every process, to the stage, to `dvc repro`)
keeps the step the ranks were in, with loader workers."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from bert.training.checkpoints import list_checkpoints, load_checkpoint
from tests.support.stage_workspace import REPO, make_workspace, run_stage, set_params

CHECKPOINTS = "data/checkpoints/phase1"


def test_extending_a_run_and_changing_its_params_never_lose_checkpoints(tmp_path):
    root = make_workspace(tmp_path / "run")
    assert run_stage(root, "stages.pretrain", "phase1").returncode == 0

    set_params(root, {"pretrain.phase1.max_steps": 12})  # extend: 8 -> 12 steps
    extended = run_stage(root, "stages.pretrain", "phase1")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert (
        "extending the run from step 8: max_steps 8 -> 12, the learning-rate schedule recomputed"
        in extended.stderr
    )
    assert "resumed from step 8" in extended.stderr
    kept = {p.name: p.read_bytes() for p in list_checkpoints(root / CHECKPOINTS)}
    assert list(kept) == ["step-00000008.pt", "step-00000012.pt"]

    set_params(root, {"pretrain.phase1.learning_rate": 0.01})  # another run: the old one moves aside
    changed = run_stage(root, "stages.pretrain", "phase1")
    assert changed.returncode == 0, changed.stderr[-3000:]
    (aside,) = [p for p in (root / CHECKPOINTS).iterdir() if p.is_dir()]
    assert (
        f"{CHECKPOINTS}/step-00000012.pt: written by a run with other params (recipe.learning_rate 0.02 -> 0.01); "
        f"its checkpoints moved to {CHECKPOINTS}/{aside.name}, starting afresh" in changed.stderr
    )
    assert {p.name: p.read_bytes() for p in list_checkpoints(aside)} == kept
    assert load_checkpoint(aside / "step-00000012.pt")["step"] == 12
    assert "resumed from" not in changed.stderr

    set_params(
        root, {"pretrain.phase1.max_steps": 5}
    )  # below the newest checkpoint: one line, nothing touched
    lowered = run_stage(root, "stages.pretrain", "phase1")
    assert lowered.returncode == 1
    assert (
        lowered.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: {CHECKPOINTS}/step-00000012.pt: the run is at step 12, past max_steps 5")
    )


LOSS_CURVE = "dvclive/pretrain_phase1/plots/metrics/train/loss.tsv"


def _uninterrupted_then_started_copy(tmp_path, changes: dict, env: dict | None = None):
    """Two workspaces of 2 ranks with `changes`: "straight" trained to the end, and a copy whose
    phase 1 is started (the Popen returned, `env` on top of its environment) for a test to disturb."""
    straight = make_workspace(tmp_path / "straight", nproc=2, micro_batch_size=4)
    set_params(straight, changes)
    disturbed = tmp_path / "disturbed"
    shutil.copytree(straight, disturbed)
    assert run_stage(straight, "stages.pretrain", "phase1").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    process = subprocess.Popen([sys.executable, "-m", "stages.pretrain", "phase1"], cwd=disturbed, env=env,
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    return straight, disturbed, process


def final_weights(root):
    return load_checkpoint(list_checkpoints(root / CHECKPOINTS)[-1])["model"]


@pytest.mark.slow
def test_sigterm_preempts_two_ranks_and_the_rerun_ends_with_the_weights_of_an_uninterrupted_run(tmp_path):
    steps = 40
    straight, preempted, process = _uninterrupted_then_started_copy(
        tmp_path, {"pretrain.phase1.max_steps": steps, "pretrain.save_every": 1000}
    )
    curve = preempted / LOSS_CURVE
    deadline = time.monotonic() + 120
    while not (curve.is_file() and len(curve.read_text().splitlines()) > 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr[-3000:]
    (checkpoint,) = list_checkpoints(preempted / CHECKPOINTS)
    step = load_checkpoint(checkpoint)["step"]
    assert stderr.strip().splitlines()[-1] == (
        f"error: pre-empted (SIGTERM); the newest checkpoint is step {step} ({CHECKPOINTS}/{checkpoint.name}, "
        "written by this run); run the stage again to resume"
    )
    assert 3 <= step < steps
    assert f"pre-empted by SIGTERM at step {step} (checkpoint of step {step} in {CHECKPOINTS})" in stderr

    resumed = run_stage(preempted, "stages.pretrain", "phase1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from step {step}" in resumed.stderr
    expected = final_weights(straight)
    for name, value in final_weights(preempted).items():
        assert torch.equal(value, expected[name]), name


@pytest.fixture(scope="module")
def long_two_rank_run(tmp_path_factory):
    """A workspace of 2 ranks whose run is far from its end and its next checkpoint, to pre-empt."""
    root = make_workspace(tmp_path_factory.mktemp("long"), nproc=2, micro_batch_size=4)
    set_params(root, {"pretrain.phase1.max_steps": 5000, "pretrain.save_every": 5000})
    return root


def _processes(pid: int) -> dict:
    """The processes started as `pid`: the stage (torchrun's parent), torchrun, the ranks, their
    loader workers, and what runs the stage (dvc and its shell, if any)."""
    import psutil

    tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    (torchrun,) = [process for process in tree if "bert.distributed.torchrun" in process.cmdline()]
    ranks = torchrun.children()
    stage = torchrun.parent()
    return {"runner": [p for p in tree if p.pid in {a.pid for a in stage.parents()}], "stage": [stage],
            "torchrun": [torchrun], "ranks": ranks, "workers": [w for rank in ranks for w in rank.children()]}  # fmt: skip


def _preempt(root, command: list[str], send, env: dict | None = None):
    """Start `command` in `root` in a session of its own, let the ranks log 3 steps, call
    send(processes, session id), wait; returns (exit status, output, steps logged before `send`,
    the processes)."""
    env = env or {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    with open(root / "output.txt", "w") as output:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
    curve = root / LOSS_CURVE
    deadline = time.monotonic() + 120
    while not (curve.is_file() and len(curve.read_text().splitlines()) > 3) and time.monotonic() < deadline:
        assert process.poll() is None, (root / "output.txt").read_text()[-3000:]
        time.sleep(0.05)
    processes = _processes(process.pid)
    logged = len(curve.read_text().splitlines()) - 1
    send(processes, process.pid)
    status = process.wait(timeout=120)
    return status, (root / "output.txt").read_text(), logged, processes


def _signal(group: str, signum: int):
    return lambda processes, session: [process.send_signal(signum) for process in processes[group]]


def _every_process(signum: int):
    return lambda processes, session: [
        process.send_signal(signum) for group in processes.values() for process in group
    ]


# The ways a pre-emption reaches a multi-rank stage, each with 1 or 2 loader workers a rank: torchrun
# passes SIGTERM on to each rank's process group (its loader workers too); SLURM's --signal=USR1 and
# scancel signal every process of the job; a user or a scheduler signals the stage.
SIGNAL_PATHS = {
    "SIGTERM to torchrun": (_signal("torchrun", signal.SIGTERM), 2),
    "SIGUSR1 to every process": (_every_process(signal.SIGUSR1), 1),
    "SIGTERM to every process": (_every_process(signal.SIGTERM), 2),
    "SIGTERM to the stage": (_signal("stage", signal.SIGTERM), 1),
}


def _assert_preempted_keeping_the_step(root, output, logged, processes, workers):
    """The ranks stopped after the step they were in, wrote it, said so, and left no process."""
    assert len(processes["workers"]) == 2 * workers  # the signal reached loader workers
    assert "killed by signal" not in output, output[-3000:]
    (checkpoint,) = list_checkpoints(root / CHECKPOINTS)
    step = load_checkpoint(checkpoint)["step"]
    assert step >= logged  # no step lost: every logged step is in the checkpoint
    said = f"(checkpoint of step {step} in {CHECKPOINTS}); run the stage again to resume"
    assert output.count(said) == 1 and said in (root / "data/logs/phase1/rank1.log").read_text()  # rank 0, 1
    newest = f"the newest checkpoint is step {step} ({checkpoint.relative_to(root)}, written by this run)"
    assert newest in "\n".join(output.strip().splitlines()[-2:])  # the stage's line (dvc's comes last)
    assert not [
        p.pid for group in processes.values() for p in group if p.is_running() and p.status() != "zombie"
    ]


@pytest.mark.parametrize("path", SIGNAL_PATHS)
def test_preemption_keeps_the_current_step_whatever_the_signal_path_and_loader_workers(
    tmp_path, long_two_rank_run, path
):
    send, workers = SIGNAL_PATHS[path]
    root = tmp_path / "run"
    shutil.copytree(long_two_rank_run, root)
    set_params(root, {"pretrain.data_workers": workers})
    status, output, logged, processes = _preempt(
        root, [sys.executable, "-m", "stages.pretrain", "phase1"], send
    )
    assert status == 1, output[-3000:]
    _assert_preempted_keeping_the_step(root, output, logged, processes, workers)
    last = output.strip().splitlines()[-1]
    if path == "SIGTERM to torchrun":  # the stage did not get it: torchrun's report says who did
        assert last.startswith("error: pre-empted (SIGTERM to torchrun on "), last
        assert "); the newest checkpoint is step" in last, last
    else:
        assert last.startswith(f"error: pre-empted ({path.split()[0]}); the newest checkpoint is step"), last


def test_sigterm_to_dvc_repro_and_all_its_processes_checkpoints_and_leaves_none_behind(
    tmp_path, long_two_rank_run
):
    """`dvc repro` started with SIGTERM ignored, as docs/operations.md says (dvc dies of it at once
    otherwise, leaving the stage to finish alone): `kill -TERM -- -PGID` (timeout, a job's end)
    reaches dvc, the stage and torchrun; dvc waits for the stage, which checkpoints, and reports."""
    from tests.test_faults import _dvc_project, _env

    root = tmp_path / "run"
    shutil.copytree(long_two_rank_run, root)
    set_params(root, {"pretrain.data_workers": 1})
    _dvc_project(root, "python -m stages.pretrain phase1")
    repro = ["bash", "-c", "trap '' TERM USR1; exec dvc repro pretrain@phase1"]
    status, output, logged, processes = _preempt(
        root, repro, lambda processes, session: os.killpg(session, signal.SIGTERM), env=_env()
    )
    assert status == 255, output[-3000:]  # dvc's, for a stage that failed
    _assert_preempted_keeping_the_step(root, output, logged, processes, workers=1)
    assert "ERROR: failed to reproduce 'pretrain@phase1'" in output


def _two_cpus() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs: one for each node, or both for the one node")
    return cpus[:2]


def _on_cpus(cpus):
    """A preexec_fn: the process (and what it starts) runs on `cpus` only, as on a node that has them."""
    return lambda: os.sched_setaffinity(0, cpus)


def _without_thread_settings() -> dict[str, str]:
    """The stages' environment with no thread count set by hand: the launcher chooses it."""
    from tests.test_faults import _env

    return {k: v for k, v in _env().items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def _cpu_threads(root) -> int:
    return json.loads((root / "metrics/pretrain_phase1.json").read_text())["cpu_threads"]


@pytest.fixture(scope="module")
def one_node_two_ranks(tmp_path_factory):
    """1 node with 2 CPUs and 2 ranks, no thread count set by hand."""
    root = make_workspace(tmp_path_factory.mktemp("one_node"), nproc=2, micro_batch_size=4)
    result = subprocess.run([sys.executable, "-m", "stages.pretrain", "phase1"], cwd=root, capture_output=True,
                            text=True, timeout=300, env=_without_thread_settings(), preexec_fn=_on_cpus(_two_cpus()))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return root


@pytest.mark.slow
def test_two_nodes_under_dvc_repro_equal_one_node_with_two_gpus(tmp_path, one_node_two_ranks):
    """Node 0 runs `dvc repro`; node 1 (here: another folder, as another machine's copy of the
    workspace) joins with one command that never touches DVC. Same weights as 1 node x 2 ranks,
    bit for bit, with no thread count set by hand: each "node" here has one of the CPUs the one
    node had both of, and the launcher gives each rank its node's CPUs over its ranks (torchrun
    alone would let a lone rank take every core, and sum in another order)."""
    from tests.test_faults import BIN, _dvc_project

    head = make_workspace(tmp_path / "head", nproc=1, micro_batch_size=4)
    set_params(head, {"distributed.nnodes": 2})
    node1 = tmp_path / "node1"
    shutil.copytree(head, node1)
    before = {p: p.read_bytes() for p in node1.rglob("*") if p.is_file()}
    _dvc_project(head, "python -m stages.pretrain phase1")
    cpu0, cpu1 = _two_cpus()
    env = {**_without_thread_settings(), "BERT_RDZV_ENDPOINT": f"127.0.0.1:{29300 + os.getpid() % 100}"}
    joined = subprocess.Popen([sys.executable, "-m", "stages.pretrain", "phase1", "--join", "1"], cwd=node1,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=_on_cpus({cpu1}))  # fmt: skip
    repro = subprocess.run([BIN / "dvc", "repro", "pretrain@phase1"], cwd=head, env=env, capture_output=True,
                           text=True, timeout=300, preexec_fn=_on_cpus({cpu0}))  # fmt: skip
    join_log, _ = joined.communicate(timeout=120)
    assert repro.returncode == 0, repro.stdout[-3000:] + repro.stderr[-3000:]
    assert joined.returncode == 0, join_log[-3000:]
    assert "--node-rank 1" in join_log and "--node-rank 0" in repro.stdout + repro.stderr
    assert "data/weights/phase1" in (head / "dvc.lock").read_text()
    written = {p: p.read_bytes() for p in node1.rglob("*") if p.is_file() and "logs" not in p.parts}
    assert written == before  # wrote nothing but its rank's log
    assert "rank1.log" in {p.name for p in (node1 / "data/logs/phase1").iterdir()}
    assert not (node1 / ".dvc").exists() and BIN.is_dir()

    assert _cpu_threads(head) == _cpu_threads(one_node_two_ranks) == 1
    expected = final_weights(one_node_two_ranks)
    for name, value in final_weights(head).items():
        assert torch.equal(value, expected[name]), name


def _without_last_checkpoint(source, copy, changes):
    """A copy of a finished run as if it had been killed after its step-4 checkpoint, with `changes`."""
    shutil.copytree(source, copy)
    list_checkpoints(copy / CHECKPOINTS)[-1].unlink()
    shutil.rmtree(copy / "data/weights/phase1")
    set_params(copy, changes)
    return copy


def _assert_close_weights(ours, reference):
    """2 ranks and 1 rank x 2 accumulation steps add the same gradients in another order."""
    for name, value in ours.items():
        torch.testing.assert_close(value, reference[name], rtol=1e-4, atol=1e-5, msg=name)


def test_a_resume_on_another_world_size_ends_where_the_uninterrupted_run_ends(tmp_path):
    """2 -> 1 and 1 -> 2 ranks through the real stage, global batch 8 (micro-batch 4): the resumed
    run trains the same rows with the same token-weighted loss as the uninterrupted one."""
    on_two = make_workspace(tmp_path / "two", nproc=2, micro_batch_size=4)
    on_one = make_workspace(tmp_path / "one", nproc=1, micro_batch_size=4)
    for root in (on_two, on_one):
        result = run_stage(root, "stages.pretrain", "phase1")
        assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(list_checkpoints(on_two / CHECKPOINTS)[-1])["step"] == 8
    _assert_close_weights(final_weights(on_two), final_weights(on_one))

    for source, copy, changes, change in [
        (on_two, tmp_path / "two_then_one", {"distributed.nproc_per_node": 1},
         "grad_accum_steps 1 -> 2, world_size 2 -> 1"),
        (on_one, tmp_path / "one_then_two", {"distributed.nproc_per_node": 2},
         "grad_accum_steps 2 -> 1, world_size 1 -> 2"),
    ]:  # fmt: skip
        resumed = run_stage(_without_last_checkpoint(source, copy, changes), "stages.pretrain", "phase1")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert "resumed from step 4 " in resumed.stderr
        assert f"resuming a run begun with other settings ({change})" in resumed.stderr
        _assert_close_weights(final_weights(copy), final_weights(source))


def _ranks(launcher: subprocess.Popen) -> list[int]:
    """The pids of the training ranks under a stage's process: torchrun's children."""
    import psutil

    torchrun = [
        p for p in psutil.Process(launcher.pid).children() if "bert.distributed.torchrun" in p.cmdline()
    ]
    return [child.pid for process in torchrun for child in process.children()]


@pytest.mark.slow
def test_a_rank_killed_is_restarted_by_torchrun_and_the_run_ends_with_the_uninterrupted_weights(tmp_path):
    """BERT_MAX_RESTARTS=1: kill -9 of one rank mid-run; torchrun restarts both, they resume
    from the newest checkpoint, and the stage ends well, its curve holding every step once."""
    steps = 120
    straight, killed, process = _uninterrupted_then_started_copy(
        tmp_path,
        {"pretrain.phase1.max_steps": steps, "pretrain.save_every": 10},
        env={"BERT_MAX_RESTARTS": "1"},
    )
    curve = killed / LOSS_CURVE
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        list_checkpoints(killed / CHECKPOINTS)
        and curve.is_file()
        and len(curve.read_text().splitlines()) > 15
    ):
        time.sleep(0.05)
    ranks = _ranks(process)
    assert len(ranks) == 2
    os.kill(ranks[1], signal.SIGKILL)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 0, stderr[-3000:]
    assert "resumed from step " in stderr
    expected = final_weights(straight)
    for name, value in final_weights(killed).items():
        assert torch.equal(value, expected[name]), name
    rows = curve.read_text().splitlines()
    step_column = rows[0].split("\t").index("step")
    assert [int(row.split("\t")[step_column]) for row in rows[1:]] == list(range(1, steps + 1))


FAKE_SRUN = """#!/bin/bash
# srun's part here: the command once per node, at once, each with its SLURM_NODEID
while [[ "$1" == --* ]]; do shift; done
pids=()
for node in $(seq 0 $((SLURM_NNODES - 1))); do SLURM_NODEID=$node "$@" & pids+=($!); done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
"""


@pytest.mark.slow
def test_the_slurm_script_runs_dvc_on_the_head_and_joins_the_other_node(tmp_path, one_node_two_ranks):
    """scripts/slurm_pretrain.sbatch with srun and scontrol played on 127.0.0.1: two nodes, one
    rank each, in one shared folder. params.yaml gets the job's nodes, node 0's `dvc repro`
    records the outputs, and the weights are those of one node with 2 ranks."""
    from tests.test_faults import _dvc_project, _env

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text(FAKE_SRUN)
    (fake / "scontrol").write_text("#!/bin/bash\nprintf '127.0.0.1\\nlocalhost\\n'\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    root = make_workspace(tmp_path / "job", nproc=1, micro_batch_size=4)
    _dvc_project(root, "python -m stages.pretrain phase1")
    env = {**_env(), "PATH": f"{fake}{os.pathsep}{_env()['PATH']}", "SLURM_NNODES": "2",
           "SLURM_JOB_NODELIST": "fake[0-1]", "GPUS_PER_NODE": "1", "PORT": str(29000 + os.getpid() % 100)}  # fmt: skip
    job = subprocess.run(["bash", str(REPO / "scripts/slurm_pretrain.sbatch"), "phase1"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    params = (root / "params.yaml").read_text()
    assert "nnodes: 2" in params and "nproc_per_node: 1" in params  # the rendezvous is not a param
    assert f"--master-addr 127.0.0.1 --master-port {env['PORT']}" in job.stdout + job.stderr
    assert "--node-rank 1" in job.stderr and "--node-rank 0" in job.stdout + job.stderr
    assert "data/weights/phase1" in (root / "dvc.lock").read_text()
    expected = final_weights(one_node_two_ranks)
    for name, value in final_weights(root).items():
        assert torch.equal(value, expected[name]), name
