"""What a Dask process must share with the stage before it gets a task (bert.dask_environment): each
difference is named with its fix, and the project's version is the content of the sources it
imports (and has loaded). Through real clusters: tests/test_compute_stages.py."""

import os
import shutil
import subprocess
import sys

import pytest

from bert.dask_environment import check_cluster, probe, problem
from bert.errors import UserError
from tests.support.stage_workspace import REPO

MINE = {
    "executable": "/repo/.venv/bin/python",
    "versions": {"python": "3.11", "torch": "2.13.0", "dask": "2026.8.0", "distributed": "2026.8.0"},
    "project": "/repo/bert",
    "digest": "a1",
    "changed": [],
}
START = "`/repo/.venv/bin/dask worker tcp://head:8786`"


def test_each_difference_is_named_with_its_fix():
    def said(worker: bool = True, **theirs) -> str | None:
        return problem(MINE, {**MINE, **theirs}, START, worker=worker)

    assert said(project="/mnt/repo/bert") is None  # the same sources elsewhere (a container's mount)
    assert said(versions={**MINE["versions"], "torch": "2.12.0", "dask": None}) == (
        "runs torch 2.12.0 and dask (none) where this stage runs torch 2.13.0 and dask 2026.8.0; "
        f"start it from this stage's environment: {START}"
    )
    assert said(executable="/usr/bin/python3", project=None) == (
        "cannot import the project (no module named 'bert' in /usr/bin/python3); install it into that "
        "environment, then start the process again: `/usr/bin/python3 -m pip install -e /repo`"
    )
    assert said(project="/home/me/old/bert", digest="b2") == (
        "imports other project code (/home/me/old/bert) than this stage (/repo/bert); start it from "
        f"this stage's checkout and environment: {START}"
    )
    changed = ["bert/corpus/shards.py", "bert/parallel.py"]
    assert said(changed=changed) == (
        "still runs the code it loaded before bert/corpus/shards.py and 1 more changed on disk; "
        f"start it again: {START}"
    )
    assert said(changed=changed, worker=False) is None  # a scheduler only reads tasks, it runs none


class Cluster:
    """A client of a cluster whose scheduler runs this environment and whose workers answer the
    probe as given: its result, or an exception (a probe that could not run there)."""

    def __init__(self, workers: dict):
        self.workers = workers

    def run_on_scheduler(self, function):
        return function()

    def run(self, function, on_error):
        assert on_error == "return"
        return self.workers


def test_the_line_names_the_first_process_that_differs_its_fix_and_how_many_more_differ():
    here = probe()
    dask = f"{os.path.dirname(sys.executable)}/dask"
    without = {**here, "executable": "/usr/bin/python3", "project": None}
    check_cluster(Cluster({"tcp://w:1": here, "tcp://w:2": here}), "tcp://head:8786")  # nothing differs
    with pytest.raises(UserError) as raised:
        check_cluster(Cluster({"tcp://w:2": without, "tcp://w:1": TypeError("code expected at most 16 arguments, got 18")}), "tcp://head:8786")  # fmt: skip
    assert str(raised.value) == (
        "compute.scheduler tcp://head:8786: the Dask worker tcp://w:1 could not run this stage's environment "
        f"check (code expected at most 16 arguments, got 18); start it from this stage's environment: `{dask} "
        "worker tcp://head:8786` (1 more process of the cluster differs too)"
    )


PROBE = (
    "import json, os, sys, time\n"
    "import bert.atomic\n"
    "from bert.dask_environment import probe\n"
    "if sys.argv[1:]:  # bert/atomic.py changes on disk after this process loaded it\n"
    "    os.utime('bert/atomic.py', (time.time() + 60, time.time() + 60))\n"
    "print(json.dumps(probe()))\n"
)


def _probe_in(folder, *args) -> dict:
    """The probe of a new process whose `bert` is the one in `folder`."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=folder, env=env, capture_output=True,
                          text=True, check=True)  # fmt: skip
    return json.loads(done.stdout)


def test_the_project_version_is_the_content_of_the_sources_a_process_imports(tmp_path):
    same, edited = tmp_path / "same", tmp_path / "edited"
    for copy in (same, edited):
        shutil.copytree(REPO / "bert", copy / "bert", ignore=shutil.ignore_patterns("__pycache__"))
    with open(edited / "bert/corpus/shards.py", "a") as source:
        source.write("# an edit\n")
    here = probe()
    assert here["project"] == str(REPO / "bert") and here["versions"]["python"] == "{}.{}".format(
        *sys.version_info
    )
    copied = _probe_in(same)
    assert copied["project"] == str(same / "bert") and copied["digest"] == here["digest"]
    assert copied["changed"] == []
    assert _probe_in(edited)["digest"] != here["digest"]
    assert _probe_in(same, "touch")["changed"] == ["bert/atomic.py"]  # loaded, then its file changed
