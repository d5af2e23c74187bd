"""Faults, on the real stages in a throw-away project (tests/support/stage_workspace.py): a training stage
SIGKILLed between checkpoints and in the middle of writing one, a data stage SIGKILLed while it
writes, and a full disk while writing a checkpoint, a shard or a part of the document table.

To kill at a known point, the run to be killed is started through RUNNER: `python -c` that slows
one library function down in that child process only (a training step, the write of one
checkpoint, the segmentation of a chunk of documents), then runs the stage module as `python -m`
would. The test polls the files the stage writes and sends SIGKILL when the wanted one appears.
The runs that must end well (the reference and the re-run after a kill) are plain `python -m`,
except where DVC's part is under test: a training stage killed under `dvc repro` and resumed by it
(DVC deletes a stage's outputs before running it, but not the `persist: true` curves). A truncated
newest checkpoint (a disk that lied) is moved aside and the run resumes from the one before.
A pool worker of each data stage (shard, documents@wikipedia, examples) SIGKILLed on one task
ends the stage at once with one line naming the task, nothing published, and the re-run recovers.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from safetensors.torch import load_file

from bert.corpus.documents import DocumentWriter
from bert.training.checkpoints import list_checkpoints, load_checkpoint
from stages.common import layout
from tests.corpus.test_wikipedia import write_dump
from tests.squad.test_stages import make_project as make_squad_project
from tests.support.stage_workspace import REPO, make_workspace, run_stage, set_params

MAX_STEPS, SAVE_EVERY = 24, 6
CHECKPOINTS = Path("data/checkpoints/phase1")
LOSS_CURVE = Path("dvclive/pretrain_phase1/plots/metrics/train/loss.tsv")
BIN = Path(sys.executable).parent

RUNNER = """
import runpy, sys, time
{patch}
module = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""

# 0.1 s more per training step: 24 steps take seconds, so a kill lands between checkpoints.
SLOW_STEPS = """
import dataclasses, bert.pretraining.loss
_loss = bert.pretraining.loss.pretraining_loss
def pretraining_loss(model, batch):
    time.sleep(0.1)
    return _loss(model, batch)
bert.pretraining.loss.pretraining_objective = dataclasses.replace(bert.pretraining.loss.pretraining_objective, loss=pretraining_loss)
"""

# The checkpoint of step 12 reaches its file in 8 KiB pieces, 0.2 s apart.
SLOW_SECOND_CHECKPOINT = """
import io, torch
_save = torch.save
def save(obj, file, *args, **kwargs):
    if not (isinstance(obj, dict) and obj.get("step") == 12):
        return _save(obj, file, *args, **kwargs)
    buffer = io.BytesIO()
    _save(obj, buffer, *args, **kwargs)
    data = buffer.getvalue()
    for start in range(0, len(data), 8192):
        file.write(data[start : start + 8192])
        file.flush()
        time.sleep(0.2)
torch.save = save
"""

# 0.3 s more per chunk of 256 documents segmented by stages.shard.
SLOW_SEGMENTS = """
import bert.corpus.shards
_segment = bert.corpus.shards._segment
def segment(*args):
    time.sleep(0.3)
    return _segment(*args)
bert.corpus.shards._segment = segment
"""


def _pretrain_workspace(root: Path) -> Path:
    make_workspace(root, keep_last=2)
    set_params(root, {"pretrain.save_every": SAVE_EVERY, "pretrain.phase1.max_steps": MAX_STEPS})
    return root


def _start(root: Path, patch: str, *args: str, preexec_fn=None) -> subprocess.Popen:
    """Start `python -m <args>` with `patch` applied, in its own session (so it can be killed
    whole), with its output in files (a full pipe would stall it)."""
    return _start_command(root, [sys.executable, "-c", RUNNER.format(patch=patch), *args], preexec_fn)


def _start_command(root: Path, command: list[str], preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        cwd=root,
        env=_env(),
        stdout=open(root / "killed.stdout", "w"),
        stderr=open(root / "killed.stderr", "w"),
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def _env() -> dict[str, str]:
    """The stages' environment: this checkout's code, one thread, and this venv's `dvc` and `python`."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }


def _wait_for(condition, process: subprocess.Popen, root: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the stage ended ({process.returncode}) before the point to act at:\n"
                        + (root / "killed.stderr").read_text()[-3000:])  # fmt: skip
        if time.monotonic() > deadline:
            _kill(process)
            pytest.fail(f"timed out waiting; stderr:\n{(root / 'killed.stderr').read_text()[-3000:]}")
        time.sleep(0.005)


def _kill(process: subprocess.Popen) -> int:
    os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def _weights(root: Path, phase: str = "phase1") -> dict[str, torch.Tensor]:
    folder = layout.weights(phase) if phase in layout.PHASES else layout.model(phase)
    return load_file(root / folder / "model.safetensors")


def _assert_same_weights(ours: dict, reference: dict) -> None:
    assert ours.keys() == reference.keys()
    for name in reference:
        assert torch.equal(ours[name], reference[name]), name


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    """The project of phase 1 trained without interruption."""
    root = _pretrain_workspace(tmp_path_factory.mktemp("reference"))
    result = run_stage(root, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    return root


@pytest.fixture(scope="module")
def reference_weights(reference_run) -> dict[str, torch.Tensor]:
    return _weights(reference_run)


# ---------------------------------------------------------------------------------------------
# Training stage killed


def _resume_and_check(root: Path, from_step: int, reference: dict) -> None:
    result = run_stage(root, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"resumed from step {from_step} " in result.stderr
    _assert_same_weights(_weights(root), reference)
    # the curves have each step once: the killed run's rows after the checkpoint are dropped
    loss_tsv = (root / "dvclive/pretrain_phase1/plots/metrics/train/loss.tsv").read_text().splitlines()
    steps = [int(line.split("\t")[loss_tsv[0].split("\t").index("step")]) for line in loss_tsv[1:]]
    assert steps == list(range(1, MAX_STEPS + 1))
    assert [p.name for p in sorted((root / CHECKPOINTS).iterdir())] == [
        f"step-{MAX_STEPS - SAVE_EVERY:08d}.pt", f"step-{MAX_STEPS:08d}.pt",
    ]  # fmt: skip


def test_pretrain_killed_between_checkpoints_resumes_to_the_same_weights(tmp_path, reference_weights):
    root = _pretrain_workspace(tmp_path)
    process = _start(root, SLOW_STEPS, "stages.pretrain", "phase1")
    first = root / CHECKPOINTS / f"step-{SAVE_EVERY:08d}.pt"
    _wait_for(first.exists, process, root)
    assert _kill(process) == -signal.SIGKILL

    found = list_checkpoints(root / CHECKPOINTS)
    assert found and found[-1].name < f"step-{MAX_STEPS:08d}.pt"  # killed halfway
    assert not (root / "data/weights/phase1").exists()
    assert not (root / "metrics/pretrain_phase1.json").exists()
    _resume_and_check(root, load_checkpoint(found[-1])["step"], reference_weights)


def test_pretrain_killed_while_writing_a_checkpoint(tmp_path, reference_weights):
    root = _pretrain_workspace(tmp_path)
    process = _start(root, SLOW_SECOND_CHECKPOINT, "stages.pretrain", "phase1")
    folder = root / CHECKPOINTS

    def writing_second() -> bool:
        return any(p.stat().st_size > 0 for p in folder.glob(".step-00000012.pt.tmp-*"))

    _wait_for(writing_second, process, root)
    assert _kill(process) == -signal.SIGKILL

    # the half-written file is there, under a name no reader takes for a checkpoint
    (partial,) = folder.glob(".step-00000012.pt.tmp-*")
    with pytest.raises((RuntimeError, OSError)):  # not a whole zip archive
        torch.load(partial, weights_only=False)
    found = list_checkpoints(folder)
    assert [p.name for p in found] == [f"step-{SAVE_EVERY:08d}.pt"]
    for path in found:  # every file matching the checkpoint glob is whole
        assert load_checkpoint(path)["step"] == SAVE_EVERY

    _resume_and_check(root, SAVE_EVERY, reference_weights)  # also: the partial temp file is gone


def _logged_steps(root: Path, curve: Path = LOSS_CURVE) -> list[int]:
    lines = (root / curve).read_text().splitlines()
    if not lines:  # DVCLive has created the file and not yet written its header
        return []
    column = lines[0].split("\t").index("step")
    return [int(line.split("\t")[column]) for line in lines[1:] if line.count("\t") == lines[0].count("\t")]


def _dvc_project(
    root: Path,
    command: str,
    name: str = "pretrain@phase1",
    deps=("data/examples/phase1", "data/vocab", "data/weights/random"),
    curves: str = "",
) -> None:
    """Make `root` a DVC project whose one stage is the repository's stage `name` (its outs,
    metrics, params and the plots of its curves as dvc.yaml has them) running `command`; of a
    `foreach` (pretrain@phase1, finetune_squad@v1.1), the one entry; `curves`, the folder of its
    curves when it is not the stage's name (dvclive/pretrain_phase1/)."""
    pipeline = yaml.safe_load((REPO / "dvc.yaml").read_text())
    group, _, key = name.partition("@")
    stage = pipeline["stages"][group]
    if key:  # the one entry of the params value the group iterates (a mapping's key, or a list's item)
        iterated = yaml.safe_load((REPO / "params.yaml").read_text())
        for part in stage["foreach"].strip("${} ").split("."):
            iterated = iterated[part]
        entry = {key: iterated[key]} if isinstance(iterated, dict) else [key]
        stage = {"foreach": entry, "do": {**stage["do"], "cmd": command, "deps": list(deps)}}
    else:
        stage = {**stage, "cmd": command, "deps": list(deps)}
    curves = curves or f"dvclive/{name.replace('@', '_')}/"
    plots = [plot for plot in pipeline["plots"]
             if all(path.startswith(curves) for path in next(iter(plot.values()))["y"])]  # fmt: skip
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {group: stage}, "plots": plots}))
    if not (root / ".dvc").exists():
        subprocess.run([BIN / "dvc", "init", "--no-scm", "--quiet"], cwd=root, check=True)


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN / "dvc", *args], cwd=root, env=_env(), capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_dvc_repro_killed_and_resumed_keeps_every_step_of_the_curve_once(tmp_path, reference_run):
    """`dvc repro` deletes a stage's outputs before running it, except `persist: true` ones: the
    curves of the killed run's steps up to its checkpoint stay, the steps logged after it go."""
    root = _pretrain_workspace(tmp_path)
    (root / "slow_runner.py").write_text(RUNNER.format(patch=SLOW_STEPS))
    _dvc_project(root, "python slow_runner.py stages.pretrain phase1")
    process = _start_command(root, [str(BIN / "dvc"), "repro", "pretrain@phase1"])
    _wait_for(lambda: (root / LOSS_CURVE).exists() and SAVE_EVERY + 2 in _logged_steps(root), process, root)
    assert _kill(process) == -signal.SIGKILL
    assert [load_checkpoint(p)["step"] for p in list_checkpoints(root / CHECKPOINTS)] == [SAVE_EVERY]

    _dvc_project(root, "python -m stages.pretrain phase1")
    result = _dvc(root, "repro", "pretrain@phase1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"resumed from step {SAVE_EVERY} " in result.stdout + result.stderr
    _assert_same_weights(_weights(root), _weights(reference_run))
    assert _logged_steps(root) == list(range(1, MAX_STEPS + 1))
    assert (root / LOSS_CURVE).read_text() == (reference_run / LOSS_CURVE).read_text()  # the same values

    shown = _dvc(root, "plots", "show", "--json")  # the plot of dvc.yaml reads the whole curve
    assert shown.returncode == 0, shown.stderr[-3000:]
    (plot,) = json.loads(shown.stdout)["data"]["Pretraining loss (phase 1)"]
    assert [int(row["step"]) for row in plot["content"]["data"]["values"]] == list(range(1, MAX_STEPS + 1))


# 0.1 s more per fine-tuning step, as SLOW_STEPS for pretraining.
SLOW_SQUAD_STEPS = """
import dataclasses, bert.squad.objective
_loss = bert.squad.objective.question_answering_objective.loss
def question_answering_loss(model, batch):
    time.sleep(0.1)
    return _loss(model, batch)
bert.squad.objective.question_answering_objective = dataclasses.replace(
    bert.squad.objective.question_answering_objective, loss=question_answering_loss
)
"""
SQUAD_CURVE = Path("dvclive/finetune_squad/plots/metrics/train/loss.tsv")
SQUAD_SAVE_EVERY = 4


def _squad_project(root: Path, vocab_file: Path) -> Path:
    """tests/squad/test_stages.py's project (8 articles of the sample world, a tiny BERT), a
    checkpoint every SQUAD_SAVE_EVERY steps."""
    make_squad_project(root, vocab_file, "v1.1")
    set_params(root, {"finetune.save_every": SQUAD_SAVE_EVERY, "finetune.log_every": 1})
    return root


@pytest.mark.slow
def test_finetune_killed_under_dvc_repro_keeps_every_step_of_the_curve_once(tmp_path, uncased_vocab):
    reference = _squad_project(tmp_path / "reference", uncased_vocab)
    result = run_stage(reference, "stages.finetune_squad")
    assert result.returncode == 0, result.stderr[-3000:]
    steps = json.loads((reference / "metrics/finetune_squad.json").read_text())["steps"]
    assert steps > SQUAD_SAVE_EVERY + 2  # the kill lands before the end

    root = _squad_project(tmp_path / "killed", uncased_vocab)
    (root / "slow_runner.py").write_text(RUNNER.format(patch=SLOW_SQUAD_STEPS))
    deps = ("data/squad", "data/weights/phase2")
    stage, curves = "finetune_squad@v1.1", f"{SQUAD_CURVE.parts[0]}/{SQUAD_CURVE.parts[1]}/"
    _dvc_project(root, "python slow_runner.py stages.finetune_squad", stage, deps, curves)
    process = _start_command(root, [str(BIN / "dvc"), "repro", stage])

    def past_the_checkpoint() -> bool:
        return (root / SQUAD_CURVE).exists() and SQUAD_SAVE_EVERY + 2 in _logged_steps(root, SQUAD_CURVE)

    _wait_for(past_the_checkpoint, process, root)
    assert _kill(process) == -signal.SIGKILL
    assert [load_checkpoint(p)["step"] for p in list_checkpoints(root / "data/checkpoints/squad")] == [
        SQUAD_SAVE_EVERY
    ]

    _dvc_project(root, "python -m stages.finetune_squad", stage, deps, curves)
    result = _dvc(root, "repro", stage)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"resumed from step {SQUAD_SAVE_EVERY} " in result.stdout + result.stderr
    _assert_same_weights(_weights(root, "squad"), _weights(reference, "squad"))
    assert _logged_steps(root, SQUAD_CURVE) == list(range(1, steps + 1))
    assert (root / SQUAD_CURVE).read_text() == (reference / SQUAD_CURVE).read_text()  # the same values


def test_pretrain_with_a_corrupt_newest_checkpoint_resumes_from_the_previous_one(tmp_path, reference_run):
    root = _pretrain_workspace(tmp_path)
    process = _start(root, SLOW_STEPS, "stages.pretrain", "phase1")
    _wait_for((root / CHECKPOINTS / f"step-{2 * SAVE_EVERY:08d}.pt").exists, process, root)
    assert _kill(process) == -signal.SIGKILL
    newest = list_checkpoints(root / CHECKPOINTS)[-1]
    assert newest.name == f"step-{2 * SAVE_EVERY:08d}.pt"
    damaged = newest.read_bytes()[: newest.stat().st_size // 2]  # a disk that lied
    newest.write_bytes(damaged)

    result = run_stage(root, "stages.pretrain", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    (warning,) = [line for line in result.stderr.splitlines() if "unreadable" in line]
    assert f"{CHECKPOINTS / newest.name}: unreadable (" in warning
    assert f"moved aside to {newest.name}.corrupt" in warning
    assert f"resumed from step {SAVE_EVERY} " in result.stderr
    _assert_same_weights(_weights(root), _weights(reference_run))
    assert _logged_steps(root) == list(range(1, MAX_STEPS + 1))
    assert (root / CHECKPOINTS / f"{newest.name}.corrupt").read_bytes() == damaged  # kept, not deleted
    assert sorted(p.name for p in (root / CHECKPOINTS).iterdir()) == [
        f"{newest.name}.corrupt", f"step-{MAX_STEPS - SAVE_EVERY:08d}.pt", f"step-{MAX_STEPS:08d}.pt",
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Data stage killed


def _shard_workspace(root: Path) -> Path:
    """A project with a cleaned document table of 1,500 documents (6 chunks of stages.shard)."""
    make_workspace(root)
    set_params(root, {"compute.num_workers": 1})
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(300)] + ["Mr.", "Dr.", "e.g.", "U.S."]
    (root / "data/clean/wikipedia").mkdir(parents=True)
    writer = DocumentWriter(root / "data/clean/wikipedia")
    for doc in range(1500):
        sentences = []
        for _ in range(int(rng.integers(1, 8))):
            chosen = rng.choice(words, size=int(rng.integers(4, 16)))
            sentences.append(" ".join(chosen).capitalize() + ".")
        writer.add("wikipedia", f"doc{doc}", f"Title {doc}", " ".join(sentences))
    writer.close()
    return root


def _kill_shard_stage_while_writing(root: Path) -> None:
    process = _start(root, SLOW_SEGMENTS, "stages.shard", "wikipedia")
    _wait_for(
        lambda: any((root / "data/shards").glob(".wikipedia.tmp-*/.chunks/chunk-000001.parquet")),
        process,
        root,
    )
    assert _kill(process) == -signal.SIGKILL


@pytest.mark.slow
def test_shard_stage_killed_leaves_no_partial_output_and_reruns_identically(tmp_path):
    reference_root = _shard_workspace(tmp_path / "reference")
    result = run_stage(reference_root, "stages.shard", "wikipedia")
    assert result.returncode == 0, result.stderr[-3000:]
    reference = _files(reference_root / "data/shards/wikipedia")
    assert "train_00000.parquet" in reference and "manifest.json" in reference

    root = _shard_workspace(tmp_path / "killed")
    shards = root / "data/shards"
    _kill_shard_stage_while_writing(root)
    assert not (shards / "wikipedia").exists()  # nothing at the output path
    assert not (root / "metrics/shard_wikipedia.json").exists()

    result = run_stage(root, "stages.shard", "wikipedia")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _files(shards / "wikipedia") == reference
    assert [p.name for p in shards.iterdir()] == ["wikipedia"]  # the killed run's temp folder is gone

    _kill_shard_stage_while_writing(root)  # now with a previous output in place
    assert _files(shards / "wikipedia") == reference

    result = run_stage(root, "stages.shard", "wikipedia")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _files(shards / "wikipedia") == reference
    assert [p.name for p in shards.iterdir()] == ["wikipedia"]


# ---------------------------------------------------------------------------------------------
# Disk full: a file-size limit (RLIMIT_FSIZE) makes write() fail with EFBIG, as ENOSPC would.


def _ignore_sigxfsz() -> None:
    # Without this the kernel kills the process (SIGXFSZ) instead of failing the write.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _run_on_a_small_disk(root: Path, max_file_bytes: int, *stage: str) -> subprocess.CompletedProcess:
    """Run a stage in `root` with no file allowed to grow past `max_file_bytes`."""

    def small_disk() -> None:
        _ignore_sigxfsz()
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", *stage], cwd=root, env=env, capture_output=True, text=True, timeout=300,
        preexec_fn=small_disk,
    )  # fmt: skip


def _assert_one_clear_line(stderr: str, starts: str) -> str:
    assert "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(starts), stderr[-3000:]
    return last


def test_disk_full_while_writing_a_checkpoint(tmp_path):
    root = _pretrain_workspace(tmp_path)
    process = _start(root, SLOW_STEPS, "stages.pretrain", "phase1", preexec_fn=_ignore_sigxfsz)
    first = root / CHECKPOINTS / f"step-{SAVE_EVERY:08d}.pt"
    _wait_for(first.exists, process, root)
    before = first.read_bytes()
    assert len(before) > 40_000
    resource.prlimit(
        process.pid, resource.RLIMIT_FSIZE, (40_000, 40_000)
    )  # the next checkpoint no longer fits
    assert process.wait(timeout=120) == 1

    stderr = (root / "killed.stderr").read_text()
    line = _assert_one_clear_line(
        stderr, "error: data/checkpoints/phase1/step-00000012.pt: cannot write checkpoint"
    )
    assert "previous checkpoints are intact" in line
    assert sorted(p.name for p in (root / CHECKPOINTS).iterdir()) == [first.name]  # no temp debris
    assert first.read_bytes() == before
    assert load_checkpoint(first)["step"] == SAVE_EVERY
    assert not (root / "data/weights/phase1").exists()


def test_disk_full_while_writing_shards(tmp_path):
    root = _shard_workspace(tmp_path)
    result = run_stage(root, "stages.shard", "wikipedia")
    assert result.returncode == 0, result.stderr[-3000:]
    shards = root / "data/shards"
    before = _files(shards / "wikipedia")
    metrics_before = (root / "metrics/shard_wikipedia.json").read_bytes()

    result = _run_on_a_small_disk(root, 4096, "stages.shard", "wikipedia")
    assert result.returncode == 1
    line = _assert_one_clear_line(result.stderr, "error: data/shards/wikipedia: disk full while writing it")
    assert "File too large" in line and "previous wikipedia is untouched" in line
    assert _files(shards / "wikipedia") == before  # the previous output intact
    assert [p.name for p in shards.iterdir()] == ["wikipedia"]  # no temp debris
    assert (root / "metrics/shard_wikipedia.json").read_bytes() == metrics_before


# ---------------------------------------------------------------------------------------------
# Examples stage (HDF5) killed, and disk full there

EXAMPLES = Path("data/examples")

# 0.5 s more per output shard of stages.examples (intra mixing: one task per output shard).
SLOW_EXAMPLE_SHARDS = """
import bert.pretraining.mixing
_task = bert.pretraining.mixing._intra_task
def intra_task(*args):
    time.sleep(0.5)
    return _task(*args)
bert.pretraining.mixing._intra_task = intra_task
"""

# Removing the previous output is slow (for a real corpus: hundreds of GB of parts); the child
# touches `removing-previous` in the project when it starts deleting a part of it.
SLOW_REMOVAL = """
import os, shutil
from pathlib import Path
_rmtree = shutil.rmtree
def rmtree(path, *args, **kwargs):
    parts = sorted(Path(path).glob("part_*.hdf5"))
    if Path(path).name.startswith(".phase1.old-") and parts:  # atomic_folder's previous output
        Path("removing-previous").touch()
        for part in parts:
            part.unlink()
            time.sleep(0.5)
    return _rmtree(path, *args, **kwargs)
shutil.rmtree = rmtree
"""


def _examples_workspace(root: Path) -> Path:
    """A project with sentence shards of both corpora in the toy vocabulary of stage_workspace."""
    from bert.corpus.sentence_shards import SHARD_SCHEMA

    make_workspace(root)
    set_params(root, {"compute.num_workers": 1})
    rng = np.random.default_rng(1)
    for corpus in ("wikipedia", "bookcorpus"):
        folder = root / "data/shards" / corpus
        folder.mkdir(parents=True)
        documents = [
            [" ".join(f"w{i}" for i in rng.integers(0, 40, size=int(rng.integers(3, 9)))) for _ in range(6)]
            for _ in range(120)
        ]
        table = pa.table({"doc_id": [f"{corpus}{i}" for i in range(len(documents))], "sentences": documents},
                         schema=SHARD_SCHEMA)  # fmt: skip
        pq.write_table(table, folder / "train_00000.parquet")
    return root


def _inter_examples_workspace(root: Path) -> Path:
    """_examples_workspace with inter mixing: a task per corpus file, then a task per output shard."""
    _examples_workspace(root)
    set_params(root, {"mixing.mode": "inter"})
    return root


def _run_examples(root: Path) -> None:
    result = run_stage(root, "stages.examples", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]


def test_examples_stage_killed_leaves_no_partial_output_and_reruns_identically(tmp_path):
    reference_root = _examples_workspace(tmp_path / "reference")
    _run_examples(reference_root)
    reference = _files(reference_root / EXAMPLES / "phase1")
    assert len([name for name in reference if name.endswith(".hdf5")]) == 4

    root = _examples_workspace(tmp_path / "killed")
    shutil.rmtree(root / EXAMPLES / "phase1")  # the workspace's own examples: start with none

    def killed_while_writing() -> None:
        process = _start(root, SLOW_EXAMPLE_SHARDS, "stages.examples", "phase1")
        _wait_for(lambda: any((root / EXAMPLES).glob(".phase1.tmp-*/part_00000.hdf5")), process, root)
        assert _kill(process) == -signal.SIGKILL

    killed_while_writing()
    assert not (root / EXAMPLES / "phase1").exists()
    _run_examples(root)
    assert _files(root / EXAMPLES / "phase1") == reference
    killed_while_writing()  # with a previous output in place
    assert _files(root / EXAMPLES / "phase1") == reference

    # killed while the previous output is being removed: the output path holds a whole output
    process = _start(root, SLOW_REMOVAL, "stages.examples", "phase1")
    _wait_for((root / "removing-previous").exists, process, root)
    time.sleep(0.1)
    assert _kill(process) == -signal.SIGKILL
    assert _files(root / EXAMPLES / "phase1") == reference

    _run_examples(root)
    assert _files(root / EXAMPLES / "phase1") == reference
    assert sorted(p.name for p in (root / EXAMPLES).iterdir()) == ["phase1", "phase2"]  # no debris


def test_disk_full_while_writing_examples(tmp_path):
    root = _examples_workspace(tmp_path)
    _run_examples(root)
    before = _files(root / EXAMPLES / "phase1")

    result = _run_on_a_small_disk(root, 8192, "stages.examples", "phase1")
    assert result.returncode == 1
    line = _assert_one_clear_line(result.stderr, "error: data/examples/phase1: disk full while writing it")
    assert "File too large" in line and "previous phase1 is untouched" in line
    assert _files(root / EXAMPLES / "phase1") == before
    assert sorted(p.name for p in (root / EXAMPLES).iterdir()) == ["phase1", "phase2"]


# ---------------------------------------------------------------------------------------------
# A data stage's pool worker killed

# A pool worker of a data stage killed (as the OOM killer kills) when it starts one task: `function`
# of `module` is replaced, in the parent before the pool forks, by one that SIGKILLs its own process
# when `task_args` (the task's arguments) match `condition`; `setup` (if any) runs first.
KILLED_WORKER = """
import os, signal
import {module}
{setup}
_task = {module}.{function}
def task(*task_args):
    if {condition}:
        os.kill(os.getpid(), signal.SIGKILL)
    return _task(*task_args)
{module}.{function} = task
task.__module__, task.__qualname__ = "{module}", "{function}"  # pickled by that name
"""


def _wikipedia_workspace(root: Path) -> Path:
    """A project with a MediaWiki dump of 40 articles (a task each with the killed run's setup)."""
    make_workspace(root)
    pages = [(i, f"Article {i}", f"'''Article {i}''' is about harbour {i}. It was dredged in {1800 + i}.", 0, None)
             for i in range(1, 41)]  # fmt: skip
    write_dump(root / "data/raw/wikipedia/dump.xml", pages=pages)
    return root


def _books_workspace(root: Path) -> Path:
    """A project with 4 Parquet files of books (a formatting task each)."""
    make_workspace(root)
    for number in range(4):
        books = [f"Book {number}.{i} begins. It ends at the harbour." for i in range(3)]
        (root / "data/raw/bookcorpus").mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.table({"book_id": ["a", "b", "c"], "text": books}),
            root / f"data/raw/bookcorpus/{number}.parquet",
        )
    return root


@pytest.mark.parametrize(
    "workspace, corpus, max_file_bytes",
    [
        (_wikipedia_workspace, "wikipedia", 1500),
        (_books_workspace, "bookcorpus", 1000),
    ],  # parts of ~2 kB, 1.5 kB
    ids=["wikipedia", "books"],
)
def test_disk_full_while_a_worker_writes_its_part_of_the_documents(
    tmp_path, workspace, corpus, max_file_bytes
):
    """The worker's error reaches the stage as it is: one line naming the output, the previous one intact."""
    root = workspace(tmp_path)
    set_params(root, {"compute.num_workers": 2})
    output = root / "data/documents" / corpus
    result = run_stage(root, "stages.documents", corpus)
    assert result.returncode == 0, result.stderr[-3000:]
    before = _files(output)

    result = _run_on_a_small_disk(root, max_file_bytes, "stages.documents", corpus)
    assert result.returncode == 1
    line = _assert_one_clear_line(
        result.stderr, f"error: data/documents/{corpus}: disk full while writing it"
    )
    assert "File too large" in line and f"previous {corpus} is untouched" in line
    assert _files(output) == before
    assert [p.name for p in output.parent.iterdir()] == [corpus]  # no temporary folder or part


@pytest.mark.parametrize(
    "workspace, stage, workers, patch, output, metrics, task",
    [
        (
            _shard_workspace,
            ("stages.shard", "wikipedia"),
            "compute.num_workers",
            dict(module="bert.corpus.shards", function="_segment", condition="task_args[1] == 512"),
            "data/shards/wikipedia",
            "metrics/shard_wikipedia.json",
            "documents 512 to 767 of data/clean/wikipedia/part-00000.parquet",
        ),
        (
            _wikipedia_workspace,
            ("stages.documents", "wikipedia"),
            "compute.num_workers",
            dict(
                module="bert.corpus.wikipedia",
                function="_extract_articles",
                setup="bert.corpus.wikipedia.TASK_CHARACTERS = 1  # a page per task",
                condition='task_args[0][0][0] == "17"',
            ),
            "data/documents/wikipedia",
            "metrics/documents_wikipedia.json",
            "pages from id 17 of data/raw/wikipedia/dump.xml",
        ),
        (
            _books_workspace,
            ("stages.documents", "bookcorpus"),
            "compute.num_workers",
            dict(
                module="bert.corpus.books", function="_format_task", condition='task_args[3] == "part-00002"'
            ),
            "data/documents/bookcorpus",
            "metrics/documents_bookcorpus.json",
            "data/raw/bookcorpus/2.parquet",
        ),
        (
            _examples_workspace,
            ("stages.examples", "phase1"),
            "compute.num_workers",
            dict(module="bert.pretraining.mixing", function="_intra_task", condition="task_args[0] == 2"),
            "data/examples/phase1",
            None,  # the stage has no metrics file (its manifest is in the output)
            "data/examples/phase1/part_00002.hdf5",
        ),
        (
            _inter_examples_workspace,
            ("stages.examples", "phase1"),
            "compute.num_workers",
            dict(module="bert.pretraining.mixing", function="_corpus_task", condition="task_args[0] == 1"),
            "data/examples/phase1",
            None,
            "data/shards/bookcorpus/train_00000.parquet",  # corpus 1's one file
        ),
        (
            _inter_examples_workspace,
            ("stages.examples", "phase1"),
            "compute.num_workers",
            dict(module="bert.pretraining.mixing", function="_mix_task", condition="task_args[0] == 2"),
            "data/examples/phase1",
            None,
            "data/examples/phase1/part_00002.hdf5",
        ),
    ],
    ids=[
        "shard",
        "documents",
        "documents-books",
        "examples",
        "examples-inter-per-corpus",
        "examples-inter-mixing",
    ],
)
def test_data_stage_worker_killed_stops_with_one_clear_line_and_reruns(
    tmp_path, workspace, stage, workers, patch, output, metrics, task
):
    root = workspace(tmp_path)
    set_params(root, {workers: 2})
    output = root / output
    result = run_stage(root, *stage)
    assert result.returncode == 0, result.stderr[-3000:]
    clean = _files(output)
    shutil.rmtree(output)
    if metrics:
        (root / metrics).unlink()
    siblings = sorted(output.parent.iterdir())

    process = _start(root, KILLED_WORKER.format(**{"setup": "", **patch}), *stage)
    assert process.wait(timeout=60) == 1  # not a stage waiting forever for the dead worker's result
    line = _assert_one_clear_line((root / "killed.stderr").read_text(), "error: ")
    assert task in line  # with the task the other worker was running when the pool broke
    assert line.endswith("a worker process died (killed, or out of memory?); re-run the stage")
    assert sorted(output.parent.iterdir()) == siblings  # nothing published, no temp debris
    assert metrics is None or not (root / metrics).exists()

    result = run_stage(root, *stage)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _files(output) == clean
