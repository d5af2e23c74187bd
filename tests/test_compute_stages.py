"""The data stages on every task engine (params.yaml `compute`), through the real stage commands in
a throw-away project: documents (Wikipedia and books), shard and examples (intra and inter mixing)
write the same bytes on the local pool with 1 and 2 workers, on a Dask LocalCluster and on a Dask
scheduler given by its address, whose workers run in another process tree (as they would on other
machines). Under `dvc repro`, on a cluster started by its own commands (`dask scheduler` and
`dask worker`, or dask-mpi) in another folder, as a user starts one: the same bytes again; a
worker whose environment lacks the project is one line before any task."""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.corpus.test_wikipedia import write_dump
from tests.support.stage_workspace import REPO, copy_project, make_workspace, run_stage, set_params
from tests.test_dag import SAMPLE_WIKIPEDIA
from tests.test_faults import BIN, _dvc, _examples_workspace, _shard_workspace

LOCAL = {"compute.scheduler": "local", "compute.num_workers": 1}


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _run(root: Path, compute: dict, *stage: str) -> None:
    set_params(root, compute)
    result = run_stage(root, *stage)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def scheduler_address():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=40) as cluster:
        yield cluster.scheduler_address


def _documents_workspace(root: Path) -> Path:
    """The sample world's multistream dump and a small single-stream one (a task each way); its
    books as .txt files and as a Parquet file (a task each)."""
    make_workspace(root)
    sample = REPO / "data/sample"
    shutil.copytree(sample / "wikipedia", root / "data/raw/wikipedia")
    write_dump(root / "data/raw/wikipedia/zz-single.xml")
    shutil.copytree(sample / "books/txt", root / "data/raw/bookcorpus/txt")
    shutil.copytree(sample / "books/parquet", root / "data/raw/bookcorpus/parquet")
    return root


def _examples(mode: str):
    def workspace(root: Path) -> Path:
        _examples_workspace(root)
        set_params(root, {"mixing.mode": mode, "mixing.num_output_shards": 3})
        return root

    return workspace


@pytest.mark.slow
@pytest.mark.parametrize(
    "workspace, stage, output",
    [
        (_documents_workspace, ("stages.documents", "wikipedia"), "data/documents/wikipedia"),
        (_documents_workspace, ("stages.documents", "bookcorpus"), "data/documents/bookcorpus"),
        (_shard_workspace, ("stages.shard", "wikipedia"), "data/shards"),
        (_examples("intra"), ("stages.examples", "phase1"), "data/examples/phase1"),
        (_examples("inter"), ("stages.examples", "phase1"), "data/examples/phase1"),
    ],
    ids=["documents-wikipedia", "documents-books", "shard", "examples-intra", "examples-inter"],
)
def test_a_data_stage_writes_the_same_bytes_on_every_engine(
    tmp_path, scheduler_address, workspace, stage, output
):
    root = workspace(tmp_path)
    _run(root, LOCAL, *stage)
    expected = _digests(root / output)
    for compute in [
        {"compute.scheduler": "local", "compute.num_workers": 2},
        {"compute.scheduler": "dask", "compute.num_workers": 2},
        {"compute.scheduler": scheduler_address, "compute.num_workers": 0},
    ]:
        shutil.rmtree(root / output)
        _run(root, compute, *stage)
        assert _digests(root / output) == expected, compute


def test_an_unknown_scheduler_is_one_line(tmp_path):
    root = _shard_workspace(tmp_path)
    set_params(root, {"compute.scheduler": "slurm"})
    result = run_stage(root, "stages.shard", "wikipedia")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: params.yaml: compute.scheduler is 'slurm'; allowed: local, dask, or a Dask scheduler's "
        "address (tcp://host:8786)"
    )


# A cluster started by its own commands -------------------------------------------------------------

CLUSTER_STAGES = ("documents@wikipedia", "clean", "shard@wikipedia", "examples@phase1")
CLUSTER_OUTPUTS = ("data/documents/wikipedia", "data/clean", "data/shards/wikipedia", "data/examples/phase1")


@pytest.fixture(scope="module")
def wikipedia_project(tmp_path_factory) -> Path:
    """A DVC project of the working tree whose data stages ran, for the sample Wikipedia alone,
    under `dvc repro` on the local pool of 2 workers: the bytes a cluster must write again."""
    root = copy_project(tmp_path_factory.mktemp("cluster") / "project")
    set_params(root, {"corpora": {"wikipedia": SAMPLE_WIKIPEDIA}, "mixing.weights": {"wikipedia": 1.0},
                      "examples.dupe_factor": 1, "compute.num_workers": 2})  # fmt: skip
    result = _dvc(root, "repro", "examples@phase1")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return root


def _environment_without_the_checkout() -> dict[str, str]:
    """What a user's shell gives a command: nothing puts this checkout on the path (the tests' own
    processes get it through PYTHONPATH), so a process imports `bert` only if it is installed."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip


@contextmanager
def _cluster(folder: Path, launcher: list[str], workers: list[list[str]], expected_workers: int):
    """Start `launcher` (a scheduler, or dask-mpi's scheduler and workers) in `folder`, then each
    of `workers` with {address} filled in; yield the scheduler's address and the workers'
    addresses once `expected_workers` have joined; stop them all. The scheduler takes a free port
    and says which in its scheduler file, so that tests running at once never collide."""
    from dask.distributed import Client

    folder.mkdir()
    scheduler_file = folder / "scheduler.json"
    started = []

    def start(command: list[str]) -> None:
        with open(folder / f"process-{len(started)}.log", "w") as log:
            started.append(subprocess.Popen(command, cwd=folder, env=_environment_without_the_checkout(),
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))  # fmt: skip

    try:
        start([part.format(scheduler_file=scheduler_file) for part in launcher])
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file() or not scheduler_file.read_text().strip().endswith("}"):
            assert time.monotonic() < deadline and started[0].poll() is None, (
                folder / "process-0.log"
            ).read_text()
            time.sleep(0.1)
        with Client(scheduler_file=str(scheduler_file), timeout="30s") as client:
            address = client.scheduler.address
            for command in workers:
                start([part.format(address=address) for part in command])
            client.wait_for_workers(expected_workers, timeout=120)
            yield address, sorted(client.scheduler_info()["workers"])
    finally:
        for process in started:  # each in a session of its own: the process and what it started
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


DASK_SCHEDULER = [str(BIN / "dask"), "scheduler", "--port", "0", "--scheduler-file", "{scheduler_file}", "--no-dashboard"]  # fmt: skip
DASK_WORKERS = [str(BIN / "dask"), "worker", "{address}", "--nworkers", "2", "--nthreads", "1", "--no-dashboard"]  # fmt: skip


def _tasks_ran(address: str) -> list[str]:
    """The names of the tasks the scheduler at `address` ran (Dask keeps one per function:
    range_articles, segment, ...)."""
    from dask.distributed import Client

    with Client(address) as client:
        return client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))


def _repro_on(cluster, root: Path, *stages: str) -> list[str]:
    """`dvc repro --force` of `stages` in `root` with compute.scheduler the cluster's address; the
    tasks it ran there."""
    address, _ = cluster
    set_params(root, {"compute.scheduler": address, "compute.num_workers": 0})
    result = _dvc(root, "repro", "--force", "--single-item", *stages)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return _tasks_ran(address)


@pytest.mark.slow
def test_dvc_repro_on_dask_scheduler_and_workers_started_elsewhere_writes_the_local_pools_bytes(
    tmp_path, wikipedia_project
):
    """As a user starts them from the project's environment: `dask scheduler &`, `dask worker
    ADDRESS --nworkers 2 &`, here from another folder, so only the installed project is importable."""
    root = tmp_path / "project"
    shutil.copytree(wikipedia_project, root, symlinks=True)
    expected = {output: _digests(root / output) for output in CLUSTER_OUTPUTS}
    with _cluster(tmp_path / "elsewhere", DASK_SCHEDULER, [DASK_WORKERS], expected_workers=2) as cluster:
        ran = _repro_on(cluster, root, *CLUSTER_STAGES)
    assert {"range_articles", "sign", "segment", "intra_task"} <= set(ran), (
        ran
    )  # documents, clean, shard, examples
    assert {output: _digests(root / output) for output in CLUSTER_OUTPUTS} == expected


@pytest.mark.slow
def test_dvc_repro_on_a_dask_mpi_cluster_writes_the_local_pools_bytes(tmp_path, wikipedia_project):
    """docs/scale-out.md's dask-mpi recipe, with MPICH from PyPI: `mpiexec -n 3 dask-mpi
    --scheduler-file F` (rank 0 the scheduler, ranks 1 and 2 a worker each), the documents stage."""
    root = tmp_path / "project"
    shutil.copytree(wikipedia_project, root, symlinks=True)
    output = "data/documents/wikipedia"
    expected = _digests(root / output)
    dask_mpi = [str(BIN / "mpiexec"), "-n", "3", str(BIN / "dask-mpi"), "--scheduler-file", "{scheduler_file}",
                "--nthreads", "1", "--no-dashboard"]  # fmt: skip
    with _cluster(tmp_path / "elsewhere", dask_mpi, [], expected_workers=2) as cluster:
        assert "range_articles" in _repro_on(cluster, root, "documents@wikipedia")
    assert _digests(root / output) == expected


@pytest.mark.slow
def test_a_worker_whose_environment_lacks_the_project_is_one_line_before_any_task(
    tmp_path, wikipedia_project
):
    """The worker's Python has every package of this environment but not the project (a venv
    whose site-packages is this one's by a path line, so the project's editable-install hook there
    never runs): the line names it and the fix, instead of Dask's deserialization traceback."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "other"], check=True)
    python = tmp_path / "other/bin/python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    root = tmp_path / "project"
    shutil.copytree(wikipedia_project, root, symlinks=True)
    worker = [str(python), str(BIN / "dask"), "worker", "{address}", "--nthreads", "1", "--no-dashboard"]
    with _cluster(tmp_path / "elsewhere", DASK_SCHEDULER, [worker], expected_workers=1) as (address, workers):
        set_params(root, {"compute.scheduler": address})
        result = run_stage(root, "stages.documents", "wikipedia")
        assert _tasks_ran(address) == []
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: compute.scheduler {address}: the Dask worker {workers[0]} cannot import the project (no "
        f"module named 'bert' in {python}); install it into that environment, then start the process "
        f"again: `{python} -m pip install -e {root}`"
    )
    assert "Traceback" not in result.stderr


SLOW_TASKS = '''"""Preloaded into a Dask worker: each task of a stage takes a few seconds more."""
import time

import bert.parallel

run_on_dask = bert.parallel._run_on_dask


def _slowly(*args):
    time.sleep(3)
    return run_on_dask(*args)


bert.parallel._run_on_dask = _slowly  # what the stage's pickled tasks name
'''


def _processing(address: str) -> bool:
    from dask.distributed import Client

    with Client(address, timeout="10s") as client:
        return client.run_on_scheduler(
            lambda dask_scheduler: any(task.state == "processing" for task in dask_scheduler.tasks.values())
        )


@pytest.mark.slow
def test_a_scheduler_killed_while_a_stage_runs_is_one_line_naming_it(tmp_path):
    """The scheduler dies (kill -9) while a task runs: the stage ends, without a hang, in one line
    naming the scheduler's address and what to do, and publishes nothing."""
    from dask.distributed import Client

    root = _documents_workspace(tmp_path / "project")
    (tmp_path / "slow_tasks.py").write_text(SLOW_TASKS)
    workers = [[*DASK_WORKERS, "--preload", str(tmp_path / "slow_tasks.py")]]
    with _cluster(tmp_path / "elsewhere", DASK_SCHEDULER, workers, expected_workers=2) as (address, _):
        set_params(root, {"compute.scheduler": address})
        env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
        stage = subprocess.Popen([sys.executable, "-m", "stages.documents", "bookcorpus"], cwd=root, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while not _processing(address):
            assert time.monotonic() < deadline and stage.poll() is None, stage.communicate()
            time.sleep(0.2)
        with Client(address, timeout="10s") as client:
            scheduler_pid = client.run_on_scheduler(os.getpid)
        os.kill(scheduler_pid, signal.SIGKILL)
        _, stderr = stage.communicate(timeout=120)
    assert stage.returncode == 1 and "Traceback" not in stderr, stderr
    assert (
        stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: compute.scheduler {address}: the Dask scheduler at {address} was lost while ")
    ), stderr
    assert "start the scheduler and its workers again" in stderr, stderr
    assert not (root / "data/documents/bookcorpus").exists()
