"""DVC commands in a throw-away project, each under a timeout: a hang fails the test instead of the suite."""

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

DVC = str(Path(sys.executable).with_name("dvc"))


def run_dvc(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`dvc <args>` in a process group of its own: a hang fails the test (and the group is killed)
    instead of hanging the suite, and so does a process it leaves behind."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [DVC, *args]
    process = subprocess.Popen(command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"dvc {' '.join(args)} hung for {timeout} s")
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"dvc {' '.join(args)} left a process behind")


def dvc(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    done = run_dvc(project, *args, timeout=timeout)
    assert done.returncode == 0, f"dvc {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def status(project: Path) -> dict:
    """`dvc status --json` less the `sources` stage, which runs at every `dvc repro` (always changed)."""
    found = json.loads(dvc(project, "status", "--json", timeout=120).stdout)
    assert found.pop("sources", ["always changed"]) == ["always changed"]
    return found


def stages_run(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def error_lines(stderr: str) -> list[str]:
    """The project's own error lines (DVC's own say `ERROR:`)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]
