import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert.corpus.sentence_shards import train_shards
from bert.errors import UserError
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.hdf5 import read_shard
from bert.pretraining.mixing import create_examples, inter_slices, intra_plan

CONFIG = ExampleConfig(max_seq_length=48, max_predictions_per_seq=8, dupe_factor=2, masking="dynamic")


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, uncased_vocab):
    """Two corpora with disjoint vocabularies (whole words of the uncased vocab), 3 and 2 train shards."""
    vocab = uncased_vocab.read_text(encoding="utf-8").splitlines()
    words = [w for w in vocab[3000:7000] if w.isalpha() and len(w) > 3]
    groups = {"wikipedia": words[0::2][:300], "bookcorpus": words[1::2][:300]}
    root = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    for corpus, num_files in (("wikipedia", 3), ("bookcorpus", 2)):
        (root / corpus).mkdir()
        for file_index in range(num_files):
            documents = [
                [
                    " ".join(rng.choice(groups[corpus], size=rng.integers(3, 12))) + "."
                    for _ in range(rng.integers(2, 9))
                ]
                for _ in range(40)
            ]
            table = pa.table(
                {"doc_id": [f"{corpus}-{file_index}-{i}" for i in range(40)], "sentences": documents}
            )
            pq.write_table(table, root / corpus / f"train_{file_index:05d}.parquet")
        pq.write_table(
            pa.table({"doc_id": ["t"], "sentences": [["held out test text."]]}),
            root / corpus / "test_00000.parquet",
        )
    ids = {corpus: {vocab.index(w) for w in group} for corpus, group in groups.items()}
    return root, ids


def run(corpora, uncased_vocab, tmp_path, mode, workers=1, weights=None, parts=3, name="out"):
    root, _ = corpora
    shards = train_shards(root, ["wikipedia", "bookcorpus"])
    output = tmp_path / name
    manifest = create_examples(
        shards, output, uncased_vocab, True, CONFIG, mode, weights or {}, parts, 5, workers
    )
    return output, manifest


def segment_corpora(shard, ids):
    """For each instance, which corpus each segment's words come from (None when mixed)."""
    wiki, books = ids["wikipedia"], ids["bookcorpus"]
    result = []
    for row, segments in zip(shard["input_ids"], shard["segment_ids"]):
        sides = []
        for segment in (0, 1):
            tokens = {int(t) for t in row[(segments == segment)] if int(t) in wiki | books}
            sides.append("wikipedia" if tokens <= wiki else "bookcorpus" if tokens <= books else None)
        result.append(tuple(sides))
    return result


def test_inter_keeps_each_pair_within_one_corpus(corpora, uncased_vocab, tmp_path):
    output, manifest = run(corpora, uncased_vocab, tmp_path, "inter")
    shards = [read_shard(output / f"part_{k:05d}.hdf5") for k in range(3)]
    sides = [pair for shard in shards for pair in segment_corpora(shard, corpora[1])]
    assert len(sides) == manifest["instances"] == sum(s["instances"] for s in manifest["shards"])
    assert all(a == b and a is not None for a, b in sides)
    # the output shards mix both corpora
    for shard in shards:
        assert {a for a, _ in segment_corpora(shard, corpora[1])} == {"wikipedia", "bookcorpus"}
    assert (
        manifest["corpora"]["wikipedia"]["documents"] == 120
        and manifest["corpora"]["bookcorpus"]["documents"] == 80
    )
    assert json.loads((output / "manifest.json").read_text()) == manifest
    assert not list(tmp_path.glob(".out.*")) and not (output / "per_corpus").exists()


def test_intra_random_next_can_cross_corpora(corpora, uncased_vocab, tmp_path):
    output, manifest = run(corpora, uncased_vocab, tmp_path, "intra")
    shards = [read_shard(output / f"part_{k:05d}.hdf5") for k in range(3)]
    crossed = actual_crossed = 0
    for shard in shards:
        for (a, b), label in zip(segment_corpora(shard, corpora[1]), shard["next_sentence_labels"]):
            assert a is not None and b is not None
            crossed += a != b
            actual_crossed += a != b and label == 0
    assert crossed > 20 and actual_crossed == 0  # only random next segments cross corpora
    assert manifest["documents"] == 200 and manifest["params"]["mode"] == "intra"


@pytest.mark.parametrize("mode", ["intra", "inter"])
def test_manifest_counts_what_each_shard_holds(corpora, uncased_vocab, tmp_path, mode):
    """The tasks report their shards' instances and tokens; the manifest must equal the files."""
    output, manifest = run(corpora, uncased_vocab, tmp_path, mode, parts=4)
    for entry in manifest["shards"]:
        shard = read_shard(output / entry["file"])
        assert entry["instances"] == len(shard["input_ids"]) > 0
        assert entry["tokens"] == int(shard["input_mask"].sum())
    assert sum(entry["tokens"] for entry in manifest["shards"]) == manifest["tokens"]


@pytest.mark.parametrize("mode", ["intra", "inter"])
def test_same_bytes_with_one_and_two_workers(corpora, uncased_vocab, tmp_path, mode):
    one, _ = run(corpora, uncased_vocab, tmp_path, mode, workers=1, name="one")
    two, _ = run(corpora, uncased_vocab, tmp_path, mode, workers=2, name="two")
    for k in range(3):
        assert (one / f"part_{k:05d}.hdf5").read_bytes() == (two / f"part_{k:05d}.hdf5").read_bytes()
    assert (one / "manifest.json").read_bytes() == (two / "manifest.json").read_bytes()


def test_weights_up_and_down_sample_documents(corpora, uncased_vocab, tmp_path):
    _, manifest = run(
        corpora, uncased_vocab, tmp_path, "inter", weights={"wikipedia": 2.0, "bookcorpus": 0.5}
    )
    assert manifest["corpora"]["wikipedia"]["documents"] == 240
    assert 25 <= manifest["corpora"]["bookcorpus"]["documents"] <= 55
    _, intra = run(
        corpora, uncased_vocab, tmp_path, "intra", weights={"wikipedia": 2.0, "bookcorpus": 0.5}, name="i"
    )
    assert intra["corpora"]["wikipedia"]["documents"] == 240
    assert intra["corpora"]["bookcorpus"]["documents"] == manifest["corpora"]["bookcorpus"]["documents"]


@pytest.mark.parametrize("num_files", [1, 2, 3, 4, 7, 12])
@pytest.mark.parametrize("num_parts", [1, 3, 4, 8])
def test_intra_plan_gives_every_document_to_exactly_one_part(num_files, num_parts):
    rows = 24
    owners = {}
    for part in range(num_parts):
        for file, stride, offset in intra_plan(num_files, num_parts, part):
            for row in range(offset, rows, stride):
                assert (file, row) not in owners
                owners[(file, row)] = part
    assert len(owners) == num_files * rows


@pytest.mark.parametrize("num_rows", [0, 1, 5, 100])
def test_inter_slices_cover_every_row_once(num_rows):
    for rotation in {0, num_rows // 3, max(num_rows - 1, 0)}:
        taken = [
            r
            for part in range(4)
            for start, stop in inter_slices(num_rows, 4, part, rotation)
            for r in range(start, stop)
        ]
        assert sorted(taken) == list(range(num_rows))


def test_missing_shards_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="run the `shard` stage"):
        train_shards(tmp_path, ["wikipedia"])


@pytest.mark.parametrize("next_sentence", [True, False])
def test_the_stage_line_gives_the_random_next_share_only_with_nsp(tmp_path, next_sentence):
    """`stages.examples` says what share of its pairs are random next segments, and says nothing of
    them in an MLM-only run (examples.next_sentence: false), which has no pairs to count."""
    from tests.support.stage_workspace import run_stage, set_params
    from tests.test_faults import _examples_workspace

    root = _examples_workspace(tmp_path)
    set_params(root, {"examples.next_sentence": next_sentence})
    result = run_stage(root, "stages.examples", "phase1")
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(line for line in result.stderr.splitlines() if "instances in" in line)
    assert ("% random next" in line) == next_sentence, line
    assert line.endswith(" tokens (intra mixing)") != next_sentence, line
