"""bert.atomic: the temporaries of dead writers are swept, and outputs get ordinary permissions."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bert.atomic import HOST, atomic_file, atomic_folder, write_json

REPO = Path(__file__).resolve().parents[1]


def dead_pid() -> int:
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(process.stdout)


def test_a_killed_writer_leaves_nothing_once_anything_is_written_beside_it(tmp_path):
    # A stage killed inside atomic_folder leaves data/.wikipedia.tmp-<pid>-*; DVC then restores
    # data/wikipedia from its run cache without running the stage. The next write into data/, of any
    # output, removes the leftover.
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os; from bert.atomic import atomic_folder\n"
            "with atomic_folder('data/wikipedia') as tmp:\n"
            "    (tmp / 'part.txt').write_text('half')\n"
            "    print(os.getpid(), flush=True)\n"
            "    os._exit(9)\n",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == 9, killed.stderr
    data = tmp_path / "data"
    (leftover,) = data.glob(".wikipedia.tmp-*")
    assert leftover.name.startswith(f".wikipedia.tmp-{int(killed.stdout)}@{HOST}-")
    (data / "wikipedia").mkdir()  # restored from the run cache
    write_json(data / "predictions.json", {})
    assert sorted(p.name for p in data.iterdir()) == ["predictions.json", "wikipedia"]


def test_only_temporaries_of_dead_processes_are_swept(tmp_path):
    dead, alive = dead_pid(), os.getppid()
    (tmp_path / f".predictions.tmp-{dead}-ab12_x").mkdir()
    (tmp_path / f".predictions.tmp-{dead}-ab12_x" / "predictions.json").write_text("{}")
    (tmp_path / f".metrics.json.tmp-{dead}-q1w2e3").write_text("{")
    (tmp_path / "phase1").mkdir()
    (tmp_path / f".phase1.old-{dead}").mkdir()  # its new output is in place: garbage
    (tmp_path / f".phase2.old-{dead}").mkdir()  # no phase2: atomic_folder(phase2) puts it back
    (tmp_path / f".part_00001.hdf5.tmp-{alive}-zz9").write_text("a pool worker still writing")
    (tmp_path / f".part_00002.hdf5.tmp-{dead}@{HOST}-k3j4l5m6").write_text("this host's, dead")
    (tmp_path / f".part_00003.hdf5.tmp-{dead}@node-17.cluster-k3j4l5m6").write_text("a Dask worker elsewhere")
    (tmp_path / ".legacy.tmp-abc123").mkdir()  # no pid: its own output's next write removes it
    (tmp_path / ".hidden.txt").write_text("not ours")
    with atomic_folder(tmp_path / "squad") as building:
        (building / "train.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            f".part_00001.hdf5.tmp-{alive}-zz9",
            f".part_00003.hdf5.tmp-{dead}@node-17.cluster-k3j4l5m6",  # its process may well be alive
            f".phase2.old-{dead}",
            ".hidden.txt",
            ".legacy.tmp-abc123",
            "phase1",
            "squad",
        ]
    )
    with atomic_folder(tmp_path / "phase2") as building:
        (building / "new").write_text("new")
    assert (tmp_path / "phase2" / "new").exists() and not list(tmp_path.glob(".phase2.*"))


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_outputs_get_ordinary_permissions_under_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        with atomic_folder(tmp_path / "model") as building:
            (building / "model.safetensors").write_bytes(b"weights")
            os.chmod(building / "model.safetensors", 0o600)  # as safetensors' save_file leaves it
            (building / "sub").mkdir(mode=0o700)
            (building / "sub" / "run.sh").write_text("#!/bin/sh\n")
            os.chmod(building / "sub" / "run.sh", 0o700)
        with atomic_file(tmp_path / "metrics.json") as tmp:
            tmp.write_text("{}")
    finally:
        os.umask(previous)
    file_mode, folder_mode = 0o666 & ~umask, 0o777 & ~umask
    modes = {
        path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
        for path in [tmp_path / "model", *sorted((tmp_path / "model").rglob("*")), tmp_path / "metrics.json"]
    }
    assert modes == {
        "model": folder_mode,
        "model/model.safetensors": file_mode,
        "model/sub": folder_mode,
        "model/sub/run.sh": folder_mode,  # an executable stays executable
        "metrics.json": file_mode,
    }
