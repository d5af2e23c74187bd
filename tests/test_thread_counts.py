"""Data-stage outputs do not depend on the thread count or the number of worker processes
(docs/operations.md, "What is reproducible"): the sample world's documents, sentence shards,
WordPiece vocabulary (trained by `tokenizers` on Rust threads, the likeliest to differ) and
phase-1 examples, built once with one thread and one worker process everywhere and once with two,
are the same bytes."""

import shutil
from pathlib import Path

from tests.support.stage_workspace import REPO, run_stage, write_params

STAGES = [
    ("stages.documents", "wikipedia"),
    ("stages.documents", "bookcorpus"),
    ("stages.clean",),
    ("stages.shard", "wikipedia"),
    ("stages.shard", "bookcorpus"),
    ("stages.vocab",),
    ("stages.examples", "phase1"),
]
OUTPUTS = ("documents", "clean", "shards", "vocab", "examples")


def sample_world_project(root: Path, workers: int) -> Path:
    """The bundled sample corpora where their download stages put them, and `workers` processes
    for every data stage that has them."""
    root.mkdir()
    write_params(root, {"compute.num_workers": workers})
    (root / "data/raw/wikipedia").mkdir(parents=True)
    for dump in (REPO / "data/sample/wikipedia").iterdir():  # multistream, with its index
        shutil.copy(dump, root / "data/raw/wikipedia")
    shutil.copytree(REPO / "data/sample/books/txt", root / "data/raw/bookcorpus")
    return root


def built_with(root: Path, threads: int) -> dict[str, dict[str, bytes]]:
    """Every file of the data stages' outputs after running them with `threads` threads (OpenMP for
    torch and NumPy's BLAS, Rayon for tokenizers)."""
    env = {"OMP_NUM_THREADS": str(threads), "RAYON_NUM_THREADS": str(threads)}
    for stage in STAGES:
        result = run_stage(root, *stage, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
    return {
        output: {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "data" / output).rglob("*")) if p.is_file()}
        for output in OUTPUTS
    }  # fmt: skip


def test_data_stage_outputs_are_the_same_bytes_with_one_thread_and_worker_or_two(tmp_path):
    single = built_with(sample_world_project(tmp_path / "one", workers=1), threads=1)
    double = built_with(sample_world_project(tmp_path / "two", workers=2), threads=2)
    vocab = single["vocab"]["data/vocab/vocab.txt"].decode().splitlines()
    assert len(vocab) > 1000 and any(token.startswith("##") for token in vocab)  # a trained vocabulary
    assert any(name.endswith(".hdf5") for name in single["examples"])
    for output in OUTPUTS:
        assert single[output].keys() == double[output].keys(), output
        differing = [name for name in single[output] if single[output][name] != double[output][name]]
        assert not differing, f"{output}: {differing} differ between 1 and 2 threads and workers"
