import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bert.corpus import sentences as punkt
from bert.corpus.documents import DocumentWriter
from bert.corpus.shards import pack_largest_first, shard_corpus, split_train_test
from bert.errors import UserError
from tests.support.stage_workspace import write_params

REPO = Path(__file__).resolve().parents[2]

NAMES = ["Alder", "Brook", "Corr", "Dunmore", "Ellery", "Fenwick", "Garth", "Hale", "Ives", "Jory"]
WORDS = [
    "river",
    "town",
    "harbour",
    "council",
    "bridge",
    "market",
    "winter",
    "summer",
    "road",
    "ship",
    "tower",
    "valley",
    "guild",
    "mill",
    "lantern",
    "orchard",
    "quarry",
    "ferry",
    "castle",
    "chapel",
    "meadow",
    "forest",
    "island",
    "mountain",
]
VERBS = ["built", "visited", "painted", "sold", "repaired", "described", "governed", "mapped"]
TEMPLATES = [
    "Dr. {n} {v} the {w} near St. {m} in {y}.",
    "The U.S. Navy {v} a {w} by Mt. {m}.",
    "Several towns, e.g. {m} and {n}, {v} a {w}.",
    "{n} Jr. {v} the old {w}.",
    "In {y} the {w} was {v} by {n}.",
    "Nobody {v} the {w} that year.",
    "Later, {n} {v} the {w} of {m} again.",
]


def synthetic_documents(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        paragraphs = []
        for _ in range(rng.randint(1, 3)):
            sentences = [
                rng.choice(TEMPLATES).format(
                    n=rng.choice(NAMES),
                    m=rng.choice(NAMES),
                    v=rng.choice(VERBS),
                    w=rng.choice(WORDS),
                    y=rng.randint(1700, 1999),
                )
                for _ in range(rng.randint(1, 12))
            ]
            paragraphs.append(" ".join(sentences))
        docs.append("\n".join(paragraphs))
    return docs


def write_table(folder: Path, texts: list[str], part_bytes: int = 20_000) -> Path:
    folder.mkdir(parents=True)
    writer = DocumentWriter(folder, part_bytes=part_bytes)
    for index, text in enumerate(texts):
        writer.add("synthetic", f"synthetic:{index}", f"Doc {index}", text)
    writer.close()
    return folder


def test_trained_punkt_keeps_abbreviations_inside_sentences():
    parameters, used = punkt.train_parameters(synthetic_documents(400))
    assert used > 0
    splitter = punkt.SentenceSplitter(parameters, curated=True)
    text = (
        "Dr. Alder built the mill near St. Corr in 1820. The U.S. Navy mapped a ferry by Mt. Hale. "
        "Several towns, e.g. Ives and Garth, sold a quarry. Brook Jr. repaired the old chapel. Nobody came."
    )
    assert splitter.split(text) == [
        "Dr. Alder built the mill near St. Corr in 1820.",
        "The U.S. Navy mapped a ferry by Mt. Hale.",
        "Several towns, e.g. Ives and Garth, sold a quarry.",
        "Brook Jr. repaired the old chapel.",
        "Nobody came.",
    ]


def test_punkt_parameters_round_trip(tmp_path):
    parameters, _ = punkt.train_parameters(synthetic_documents(50))
    punkt.save_parameters(parameters, tmp_path / "p.json")
    loaded = punkt.load_parameters(tmp_path / "p.json")
    assert (
        loaded.abbrev_types == parameters.abbrev_types and loaded.abbrev_types >= punkt.COMMON_ABBREVIATIONS
    )
    assert loaded.collocations == parameters.collocations and loaded.sent_starters == parameters.sent_starters
    assert dict(loaded.ortho_context) == dict(parameters.ortho_context)


def test_normalisation_keeps_non_ascii():
    splitter = punkt.SentenceSplitter(punkt.train_parameters(synthetic_documents(50))[0], curated=True)
    decomposed = "Cafe\u0301  au\u00a0lait\tin Ærø.   Zoë   left.\n\n  Ça va ?  "
    assert splitter.split(decomposed) == ["Café au lait in Ærø.", "Zoë left.", "Ça va ?"]


def test_scatter_groups_are_runs_of_chunks_closing_at_group_bytes(monkeypatch):
    from bert.corpus import shards as shards_module

    monkeypatch.setattr(shards_module, "GROUP_BYTES", 10)
    assert shards_module.chunk_groups(np.array([4, 0, 6, 11, 3, 3])) == [(0, 3), (3, 4), (4, 6)]
    assert shards_module.chunk_groups(np.array([0, 0])) == [(0, 2)]
    assert shards_module.chunk_groups(np.zeros(0, np.int64)) == []


def test_split_and_packing_rules():
    sizes = np.array([100, 90, 80, 70, 60, 50, 40, 30, 20, 10], dtype=np.int64)
    assignment = pack_largest_first(np.arange(10), sizes, 3)
    loads = [sum(int(sizes[i]) for i, b in assignment.items() if b == shard) for shard in range(3)]
    assert sorted(loads) == [180, 180, 190]
    is_test = split_train_test(sizes, 0.2, seed=7)
    assert 0.2 <= sizes[is_test].sum() / sizes.sum() < 0.2 + 100 / sizes.sum()
    assert (split_train_test(sizes, 0.2, seed=7) == is_test).all()
    assert not split_train_test(sizes, 0.0, seed=7).any()


def read_shards(folder: Path) -> dict[str, list[dict]]:
    return {p.name: pq.read_table(p).to_pylist() for p in sorted(folder.glob("*_*.parquet"))}


def test_shards_balanced_deterministic_and_independent_of_workers(tmp_path):
    texts = synthetic_documents(300, seed=1) + ["Too short."]
    documents = write_table(tmp_path / "docs", texts)
    options = dict(
        num_train_shards=4, num_test_shards=2, test_fraction=0.1, min_sentences=2, seed=3, punkt_mode="auto"
    )
    one = shard_corpus(documents, tmp_path / "one", compute=1, **options)
    two = shard_corpus(documents, tmp_path / "two", compute=2, **options)
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == [
        "manifest.json",
        "punkt_params.json",
        *(f"test_0000{i}.parquet" for i in range(2)),
        *(f"train_0000{i}.parquet" for i in range(4)),
    ]
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    assert {
        k: v
        for k, v in one.items()
        if k not in ("seconds", "punkt_training_seconds", "sentences_per_second", "workers")
    } == {
        k: v
        for k, v in two.items()
        if k not in ("seconds", "punkt_training_seconds", "sentences_per_second", "workers")
    }

    shards = read_shards(tmp_path / "one")
    kept = [doc for rows in shards.values() for doc in rows]
    splitter = punkt.SentenceSplitter(
        punkt.load_parameters(tmp_path / "one" / "punkt_params.json"), curated=True
    )
    expected_kept = sum(1 for t in texts if len(splitter.split(t)) >= 2)
    assert len(kept) == one["documents"] == expected_kept and one["dropped"] == len(texts) - expected_kept
    assert len({doc["doc_id"] for doc in kept}) == len(kept)  # documents never split or repeated
    assert "synthetic:300" not in {doc["doc_id"] for doc in kept}  # "Too short." has one sentence
    manifest = json.loads((tmp_path / "one" / "manifest.json").read_text())
    train_bytes = [s["bytes"] for s in manifest["shards"] if s["file"].startswith("train")]
    assert min(train_bytes) / max(train_bytes) > 0.97
    assert 0.1 <= one["test_bytes_fraction"] < 0.12
    for rows in shards.values():  # each shard keeps input order
        order = [int(doc["doc_id"].split(":")[1]) for doc in rows]
        assert order == sorted(order)

    other_seed = shard_corpus(documents, tmp_path / "seed", compute=1, **{**options, "seed": 4})
    assert read_shards(tmp_path / "seed") != shards and other_seed["documents"] == one["documents"]


def test_workers_read_and_write_the_text_and_row_groups_close_by_bytes(tmp_path, monkeypatch):
    """Segmentation tasks come from the table's metadata and return only numbers (the text stays
    on the workers); a shard's row group closes after the document that fills ROW_GROUP_BYTES."""
    from bert.corpus import shards as shards_module

    texts = synthetic_documents(600, seed=2)
    documents = write_table(tmp_path / "docs", texts, part_bytes=150_000)
    files = sorted(documents.glob("*.parquet"))
    tasks = list(shards_module.segment_tasks(files))
    rows = {str(f): pq.ParquetFile(f).metadata.num_rows for f in files}
    assert len(files) > 1 and {path for path, _, _ in tasks} == set(rows)
    for path in rows:  # the tasks of a file cover its rows once, in order, at most a chunk each
        spans = [(start, end) for p, start, end in tasks if p == path]
        assert spans[0][0] == 0 and spans[-1][1] == rows[path]
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(0 < end - start <= shards_module.CHUNK_DOCUMENTS for start, end in spans)
    shards_module._init_worker(None if punkt.pretrained_parameters() else _trained(tmp_path))
    sizes, counts, dropped = shards_module._segment(*tasks[0], str(tmp_path / "chunk.parquet"), 2)
    assert sizes.dtype == counts.dtype == np.int64 and isinstance(dropped, int)
    chunk = pq.read_table(tmp_path / "chunk.parquet").to_pylist()
    assert [sum(len(s.encode()) for s in row["sentences"]) for row in chunk] == sizes.tolist()
    assert [len(row["sentences"]) for row in chunk] == counts.tolist()

    monkeypatch.setattr(shards_module, "ROW_GROUP_BYTES", 3000)
    options = dict(
        num_train_shards=2, num_test_shards=1, test_fraction=0.1, min_sentences=2, seed=3, punkt_mode="auto"
    )
    shard_corpus(documents, tmp_path / "out", compute=1, **options)
    # The scatter tasks' groups never reach the output: a group per chunk, on 2 workers (which
    # fork, so they see the patched size), gives the same bytes as one group in this process.
    monkeypatch.setattr(shards_module, "GROUP_BYTES", 1)
    shard_corpus(documents, tmp_path / "grouped", compute=2, **options)
    assert len(tasks) > 4
    for path in sorted((tmp_path / "out").iterdir()):
        assert path.read_bytes() == (tmp_path / "grouped" / path.name).read_bytes(), path.name
    assert sorted(p.name for p in (tmp_path / "grouped").iterdir()) == sorted(
        p.name for p in (tmp_path / "out").iterdir()
    )
    groups = 0
    for path in sorted((tmp_path / "out").glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group).to_pylist()
            sizes = [sum(len(s.encode()) for s in row["sentences"]) for row in table]
            if group < parquet.num_row_groups - 1:  # full, and full only with its last document
                assert sum(sizes) >= 3000 > sum(sizes[:-1]), (path.name, group)
            groups += 1
    assert groups > 10


def _trained(tmp_path: Path) -> str:
    parameters, _ = punkt.train_parameters(synthetic_documents(200))
    punkt.save_parameters(parameters, tmp_path / "punkt.json")
    return str(tmp_path / "punkt.json")


def test_empty_corpus_leaves_no_output(tmp_path):
    documents = write_table(tmp_path / "docs", ["One sentence only.", "Another."])
    with pytest.raises(UserError, match="no document has at least 2 sentences"):
        shard_corpus(
            documents,
            tmp_path / "out" / "shards",
            num_train_shards=2,
            num_test_shards=1,
            test_fraction=0.1,
            min_sentences=2,
            punkt_mode="auto",
            seed=0,
            compute=1,
        )
    assert list((tmp_path / "out").iterdir()) == []


def test_pretrained_mode_without_nltk_data_is_a_clear_error(tmp_path):
    if punkt.pretrained_parameters() is not None:
        pytest.skip("NLTK's punkt_tab is installed here")
    documents = write_table(tmp_path / "docs", synthetic_documents(5))
    with pytest.raises(UserError, match="punkt_tab data is not installed"):
        shard_corpus(
            documents,
            tmp_path / "out",
            num_train_shards=1,
            num_test_shards=0,
            test_fraction=0.0,
            min_sentences=1,
            punkt_mode="pretrained",
            seed=0,
            compute=1,
        )


def test_shard_stage(tmp_path):
    write_table(tmp_path / "data" / "clean" / "bookcorpus", synthetic_documents(60))
    write_params(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "stages.shard"]
    result = subprocess.run(
        [*run, "bookcorpus"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics" / "shard_bookcorpus.json").read_text())
    assert metrics["documents"] + metrics["dropped"] == 60 and metrics["sentences_per_second"] > 0
    assert 0.025 <= metrics["test_bytes_fraction"] <= 0.075 and "test_fraction" not in result.stderr
    assert len(list((tmp_path / "data" / "shards" / "bookcorpus").glob("train_*.parquet"))) == 4

    missing = subprocess.run(
        [*run, "wikipedia"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert (
        missing.stderr.strip().splitlines()[-1]
        == "error: data/clean/wikipedia: not found; run the stage that writes it first"
    )


def test_a_test_share_far_from_test_fraction_is_said(tmp_path):
    """Six documents, one of them large: the test shard takes whole documents, so its share of the
    bytes cannot come near shard.test_fraction 0.05; the stage says so and records the share."""
    texts = synthetic_documents(6, seed=3)
    write_table(tmp_path / "data" / "clean" / "bookcorpus", texts)
    write_params(tmp_path, {"shard.num_train_shards": 2})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "stages.shard", "bookcorpus"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics" / "shard_bookcorpus.json").read_text())
    share = metrics["test_bytes_fraction"]
    assert share > 0.075 and metrics["test_documents"] >= 1
    warnings = [line for line in result.stderr.splitlines() if "shard.test_fraction" in line]
    assert len(warnings) == 1 and f"the test shards hold {100 * share:.1f}% of the bytes" in warnings[0]
    assert (
        f"({metrics['test_documents']} of {metrics['documents']} documents) against shard.test_fraction 0.05"
        in warnings[0]
    )


def _die_once_in_each_task_kind(marker_dir: str) -> None:
    """On a Dask worker: the first segment, scatter and gather task to run there writes half a
    file under its output's temporary name and kills its worker, as the OOM killer would."""
    import signal

    from bert.atomic import temporary_file
    from bert.corpus import shards

    def dying_once(real, output_of):
        def task(*args):
            marker = Path(marker_dir) / real.__name__
            try:
                marker.touch(exist_ok=False)
            except FileExistsError:
                return real(*args)
            temporary_file(Path(output_of(args))).write_bytes(b"PAR1 half a file")
            os.kill(os.getpid(), signal.SIGKILL)

        return task

    shards._segment = dying_once(shards._segment, lambda args: args[3])
    shards._scatter = dying_once(shards._scatter, lambda args: args[2])
    shards._gather = dying_once(shards._gather, lambda args: args[0])


@pytest.mark.slow
def test_tasks_killed_once_on_dask_run_again_and_leave_no_partial_file(tmp_path, monkeypatch):
    from dask.distributed import Client, LocalCluster, WorkerPlugin

    from bert.compute import Compute
    from bert.corpus import shards as shards_module

    class DieOnceInEachTaskKind(WorkerPlugin):  # set up on every worker, the restarted ones too
        def __init__(self, marker_dir: str):
            self.marker_dir = marker_dir

        def setup(self, worker) -> None:
            _die_once_in_each_task_kind(self.marker_dir)

    monkeypatch.setattr(shards_module, "GROUP_BYTES", 1)  # the driver's grouping: a scatter task per chunk
    documents = write_table(tmp_path / "docs", synthetic_documents(700, seed=5), part_bytes=100_000)
    options = dict(
        num_train_shards=3, num_test_shards=1, test_fraction=0.1, min_sentences=2, seed=3, punkt_mode="auto"
    )
    shard_corpus(documents, tmp_path / "local", compute=1, **options)
    (tmp_path / "markers").mkdir()
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=50) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(DieOnceInEachTaskKind(str(tmp_path / "markers")))
        shard_corpus(documents, tmp_path / "dask", compute=Compute(cluster.scheduler_address, 0), **options)
    assert sorted(p.name for p in (tmp_path / "markers").iterdir()) == ["_gather", "_scatter", "_segment"]
    written = sorted(p.name for p in (tmp_path / "dask").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "local").iterdir())  # no temporary left
    for name in written:
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
