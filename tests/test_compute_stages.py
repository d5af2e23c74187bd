"""The data stages on every task engine (params.yaml `compute`), through the real stage commands in
a throw-away project: documents (Wikipedia and books), shard and examples (intra and inter mixing)
write the same bytes on the local pool with 1 and 2 workers, on a Dask LocalCluster and on a Dask
scheduler given by its address, whose workers run in another process tree (as they would on other
machines)."""

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.corpus.test_wikipedia import write_dump
from tests.support.stage_workspace import REPO, make_workspace, run_stage, set_params
from tests.test_faults import _examples_workspace, _shard_workspace

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
