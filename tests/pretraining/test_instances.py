import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert.errors import SettingsError
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.hdf5 import ShardWriter, read_shard
from bert.pretraining.instances import (
    TokenizedDocuments,
    create_from_files,
    create_pairs,
    truncate,
    truncation,
)
from bert.pretraining.masking import mask_batch
from bert.text.tokenization import continuation_table, load_tokenizer

MAX_SEQ, MAX_PRED = 64, 10


def make_documents(seed: int, count: int, words: list[str]) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [
        [" ".join(rng.choice(words, size=rng.integers(3, 18))) + "." for _ in range(rng.integers(2, 14))]
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def words(uncased_vocab) -> list[str]:
    # real words plus ones WordPiece splits into several pieces (for whole-word masking)
    vocab = uncased_vocab.read_text(encoding="utf-8").splitlines()
    plain = [w for w in vocab[2000:6000] if w.isalpha()]
    return plain[:400] + ["tokenisation", "unaffable", "pretraining", "hyperparameters", "wordpieces"] * 20


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, words):
    folder = tmp_path_factory.mktemp("inputs")
    text = folder / "a.txt"
    text.write_text(
        "\n\n".join("\n".join(doc) for doc in make_documents(1, 150, words)) + "\n", encoding="utf-8"
    )
    documents = make_documents(2, 150, words)
    parquet = folder / "train_00000.parquet"
    table = pa.table({"doc_id": [f"d{i}" for i in range(len(documents))], "sentences": documents})
    pq.write_table(table, parquet)
    return [str(text), str(parquet)]


def build(inputs, vocab, tmp_path, name="out.hdf5", workers=1, **overrides):
    config = ExampleConfig(
        **{"max_seq_length": MAX_SEQ, "max_predictions_per_seq": MAX_PRED, "dupe_factor": 3, **overrides}
    )
    output = tmp_path / name
    stats = create_from_files(inputs, output, vocab, True, config, seed=7, num_workers=workers)
    return read_shard(output), stats, output


@pytest.fixture(scope="module")
def static_and_dynamic(inputs, uncased_vocab, tmp_path_factory):
    folder = tmp_path_factory.mktemp("out")
    static, stats, _ = build(inputs, uncased_vocab, folder, "static.hdf5")
    dynamic, _, path = build(inputs, uncased_vocab, folder, "dynamic.hdf5", masking="dynamic")
    return static, dynamic, stats, path


def test_layout_and_dtypes(static_and_dynamic):
    static, _, stats, _ = static_and_dynamic
    n = len(static["input_ids"])
    assert n == stats.instances > 1000
    expected = {
        "input_ids": (np.int32, (n, MAX_SEQ)),
        "input_mask": (np.int8, (n, MAX_SEQ)),
        "segment_ids": (np.int8, (n, MAX_SEQ)),
        "masked_lm_positions": (np.int32, (n, MAX_PRED)),
        "masked_lm_ids": (np.int32, (n, MAX_PRED)),
        "next_sentence_labels": (np.int8, (n,)),
    }
    assert {k: (v.dtype.type, v.shape) for k, v in static.items()} == expected


def test_sequence_invariants(static_and_dynamic, uncased_vocab):
    _, dynamic, stats, _ = static_and_dynamic
    tokenizer = load_tokenizer(uncased_vocab)
    cls, sep, pad = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
    ids, mask, segments = dynamic["input_ids"], dynamic["input_mask"].astype(bool), dynamic["segment_ids"]
    lengths = mask.sum(axis=1)
    assert (ids[:, 0] == cls).all()
    assert ((ids == sep).sum(axis=1) == 2).all()
    assert (ids[np.arange(len(ids)), lengths - 1] == sep).all()
    assert (lengths <= MAX_SEQ).all() and (lengths >= 5).all()
    # padding only after the real tokens, and it is [PAD] with segment 0
    assert (mask == (np.arange(MAX_SEQ)[None, :] < lengths[:, None])).all()
    assert (ids[~mask] == pad).all() and (segments[~mask] == 0).all()
    # segment ids: 0 through the first [SEP], then 1 through the last
    first_sep = np.argmax(ids == sep, axis=1)
    position = np.arange(MAX_SEQ)[None, :]
    assert (segments == ((position > first_sep[:, None]) & mask)).all()
    assert stats.tokens == lengths.sum()
    # next-sentence labels about half and half (a one-sentence chunk always gets a random next)
    assert 0.45 < dynamic["next_sentence_labels"].mean() < 0.62


def test_masking_invariants(static_and_dynamic, uncased_vocab):
    static, dynamic, _, _ = static_and_dynamic
    tokenizer = load_tokenizer(uncased_vocab)
    cls, sep, mask_id = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]"))
    original = dynamic["input_ids"]  # same pairs: pair choices and masks use separate generators
    positions, labels = static["masked_lm_positions"], static["masked_lm_ids"]
    lengths = dynamic["input_mask"].sum(axis=1).astype(int)
    count = (labels != 0).sum(axis=1)
    expected = np.minimum(MAX_PRED, np.maximum(1, np.round(lengths * 0.15)))
    assert (count == expected).all()
    used = np.arange(MAX_PRED)[None, :] < count[:, None]
    assert (positions[~used] == 0).all() and (labels[~used] == 0).all()
    rows = np.nonzero(used)[0]
    cols = positions[used]
    assert (np.diff(positions, axis=1)[used[:, 1:]] > 0).all()  # strictly increasing
    assert (cols > 0).all() and (cols < lengths[rows]).all()
    assert not np.isin(original[rows, cols], [cls, sep]).any()
    assert (labels[used] == original[rows, cols]).all()
    # everything outside the masked positions is unchanged
    changed = static["input_ids"] != original
    outside = np.ones_like(changed)
    outside[rows, cols] = False
    assert not changed[outside].any()
    # 80% [MASK], 10% random, 10% kept
    replaced = static["input_ids"][rows, cols]
    share_mask = (replaced == mask_id).mean()
    share_kept = (replaced == labels[used]).mean()
    assert abs(share_mask - 0.8) < 0.03 and abs(share_kept - 0.1) < 0.03
    # masking rate near masked_lm_prob of the real tokens
    assert abs(count.sum() / lengths.sum() - 0.15) < 0.02
    assert static["next_sentence_labels"].tolist() == dynamic["next_sentence_labels"].tolist()


def test_dynamic_masking_file_attributes(static_and_dynamic):
    import h5py

    _, dynamic, _, path = static_and_dynamic
    assert not dynamic["masked_lm_positions"].any() and not dynamic["masked_lm_ids"].any()
    with h5py.File(path) as file:
        attrs = dict(file.attrs)
    assert attrs["masking"] == "dynamic" and attrs["max_predictions_per_seq"] == MAX_PRED
    assert attrs["masked_lm_prob"] == 0.15 and not attrs["whole_word_mask"]


def test_same_bytes_whatever_the_number_of_workers(inputs, uncased_vocab, tmp_path):
    _, _, one = build(inputs, uncased_vocab, tmp_path, "one.hdf5", workers=1)
    _, _, two = build(inputs, uncased_vocab, tmp_path, "two.hdf5", workers=2)
    _, _, again = build(inputs, uncased_vocab, tmp_path, "again.hdf5", workers=2)
    assert one.read_bytes() == two.read_bytes() == again.read_bytes()
    _, _, other_seed = build(inputs[::-1], uncased_vocab, tmp_path, "other.hdf5")
    assert other_seed.read_bytes() != one.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.hdf5", "one.hdf5", "other.hdf5", "two.hdf5"]


def test_shard_writer_round_trips_any_values(tmp_path):
    # the scale-offset filter packs each chunk into the bits its values need: check it is lossless
    # for chunks of all zeros, of a single value, of small and of huge ids, and a partial last chunk
    rng = np.random.default_rng(0)
    n = 3000
    batch = {
        "input_ids": rng.integers(0, 2**31 - 1, (n, 16), dtype=np.int32),
        "input_mask": rng.integers(0, 2, (n, 16), dtype=np.int8),
        "segment_ids": np.ones((n, 16), dtype=np.int8),
        "masked_lm_positions": np.zeros((n, 4), dtype=np.int32),
        "masked_lm_ids": rng.integers(0, 119547, (n, 4), dtype=np.int32),
        "next_sentence_labels": rng.integers(-128, 128, n, dtype=np.int8),
    }
    batch["input_ids"][:1024] = 0
    batch["input_ids"][1024:2048] = rng.integers(0, 30522, (1024, 16))
    with ShardWriter(tmp_path / "x.hdf5", 16, 4, {}) as writer:
        writer.append({name: array[:1500] for name, array in batch.items()})
        writer.append({name: array[1500:] for name, array in batch.items()})
    back = read_shard(tmp_path / "x.hdf5")
    for name, array in batch.items():
        assert back[name].dtype == array.dtype and (back[name] == array).all(), name


def test_whole_word_masking_masks_all_pieces_of_a_word(inputs, uncased_vocab, tmp_path):
    shard, _, _ = build(inputs, uncased_vocab, tmp_path, whole_word_mask=True)
    plain, _, _ = build(
        inputs, uncased_vocab, tmp_path, "plain.hdf5", whole_word_mask=True, masking="dynamic"
    )
    original = plain["input_ids"]
    continuation = continuation_table(load_tokenizer(uncased_vocab))
    masked = np.zeros(original.shape, dtype=bool)
    rows, slots = np.nonzero(shard["masked_lm_ids"])
    masked[rows, shard["masked_lm_positions"][rows, slots]] = True
    real = plain["input_mask"].astype(bool)
    special = np.isin(original, [101, 102]) | ~real
    # a ## piece belongs to the word before it (unless truncation cut that word off at a [SEP])
    follows = continuation[original] & ~special
    follows[:, 1:] &= ~special[:, :-1]
    follows[:, 0] = False
    # a ## piece is masked exactly when the piece before it is
    assert (masked[:, 1:][follows[:, 1:]] == masked[:, :-1][follows[:, 1:]]).all()
    assert follows.sum() > 500 and (masked & follows).sum() > 50
    lengths = real.sum(axis=1)
    assert (masked.sum(axis=1) <= np.minimum(MAX_PRED, np.maximum(1, np.round(lengths * 0.15)))).all()


def reference_truncate(length_a, length_b, max_num_tokens):
    removed_a = removed_b = 0
    while length_a + length_b > max_num_tokens:
        if length_a > length_b:
            length_a -= 1
            removed_a += 1
        else:
            length_b -= 1
            removed_b += 1
    return removed_a, removed_b


def test_truncation_matches_the_reference_loop():
    for a in range(1, 40):
        for b in range(1, 40):
            for limit in (2, 5, 17, 30, 61):
                assert truncation(a, b, limit) == reference_truncate(a, b, limit), (a, b, limit)


def test_truncate_removes_from_a_random_end_of_the_longer_segment():
    pairs = np.array([[1000, 90, 5000, 30, 0]] * 20000, dtype=np.int64)
    truncate(pairs, 61, np.random.default_rng(0))
    start_a, length_a, start_b, length_b, _ = pairs.T
    assert (length_a == 31).all() and (length_b == 30).all()  # all 59 from A, still the longer one
    assert (start_b == 5000).all()
    # each of the 59 removed tokens comes from the front with probability 1/2
    front = start_a - 1000
    assert (front >= 0).all() and (front <= 59).all() and abs(front.mean() - 29.5) < 0.2
    assert 3.3 < front.std() < 4.3  # binomial(59, 1/2): 3.84


def toy_documents(sentence_lengths: list[list[int]]) -> TokenizedDocuments:
    lengths = [n for doc in sentence_lengths for n in doc]
    return TokenizedDocuments(
        ids=np.arange(sum(lengths), dtype=np.int32),
        word_start=np.ones(sum(lengths), dtype=bool),
        sentence_starts=np.concatenate([[0], np.cumsum(lengths)]),
        document_starts=np.concatenate([[0], np.cumsum([len(doc) for doc in sentence_lengths])]),
        identity=np.arange(len(sentence_lengths)),
    )


def test_pairs_short_sequences_random_next_and_put_back():
    docs = toy_documents([[4] * 60 for _ in range(400)])
    config = ExampleConfig(max_seq_length=64, short_seq_prob=0.1)
    rng = random.Random(3)
    short_first, total = 0, 0
    doc_of = (
        np.searchsorted(docs.sentence_starts[docs.document_starts], np.arange(len(docs.ids)), side="right")
        - 1
    )
    for document in range(docs.num_documents):
        pairs = create_pairs(docs, [document], config, rng)
        start_a, length_a, start_b, length_b, label = pairs.T
        assert (length_a >= 1).all() and (length_b >= 1).all() and (length_a + length_b <= 61).all()
        assert (doc_of[start_a] == document).all() and (doc_of[start_a + length_a - 1] == document).all()
        # random next segments come from another document; actual next ones follow A directly
        assert (doc_of[start_b[label == 1]] != document).all()
        actual = label == 0
        assert (doc_of[start_b[actual]] == document).all()
        assert (start_b[actual] >= (start_a + length_a)[actual]).all()  # B after A (minus truncation)
        short_first += length_a[0] + length_b[0] < 61 - 4
        total += len(pairs)
    assert 0.05 < short_first / docs.num_documents < 0.15
    # sentences left over after a random next are put back, so A segments cover the document
    pairs = create_pairs(docs, [0], ExampleConfig(max_seq_length=64, short_seq_prob=0.0), random.Random(0))
    covered = np.zeros(len(docs.ids), dtype=bool)
    for start_a, length_a, start_b, length_b, label in pairs:
        covered[start_a : start_a + length_a] = True
        if not label:
            covered[start_b : start_b + length_b] = True
    assert covered[:240].mean() > 0.9


def test_mask_batch_unit():
    rng = np.random.default_rng(0)
    ids = np.arange(1, 201, dtype=np.int32).reshape(4, 50)
    candidate = np.zeros((4, 50), dtype=bool)
    candidate[:, 1:30] = True
    candidate[3] = False  # a row with nothing to mask
    masked, positions, labels = mask_batch(ids, candidate, None, 0.15, 5, np.arange(1000), 0, rng)
    assert positions.shape == labels.shape == (4, 5) and positions.dtype == np.int32
    assert ((labels != 0).sum(axis=1) == [5, 5, 5, 0]).all()  # round(32 * 0.15) = 5
    for row in range(3):
        assert set(positions[row]) <= set(range(1, 30))
        assert (labels[row] == ids[row, positions[row]]).all()
    assert (masked[3] == ids[3]).all() and (masked[:, 30:] == ids[:, 30:]).all()


def test_mask_batch_picks_uniform_subsets():
    # 6 candidates, 9 tokens with [CLS]/[SEP]s: round(9 * 0.25) = 2 picks, 15 possible pairs
    ids = np.arange(1, 9, dtype=np.int32)[None, :].repeat(30000, axis=0)
    candidate = np.zeros(ids.shape, dtype=bool)
    candidate[:, [1, 2, 3, 5, 6, 7]] = True
    _, positions, _ = mask_batch(ids, candidate, None, 0.25, 3, np.arange(1000), 0, np.random.default_rng(1))
    assert (positions[:, 2] == 0).all() and (positions[:, 0] < positions[:, 1]).all()
    assert np.isin(positions[:, :2], [1, 2, 3, 5, 6, 7]).all()
    _, counts = np.unique(positions[:, 0] * 10 + positions[:, 1], return_counts=True)
    assert len(counts) == 15 and abs(counts / 30000 - 1 / 15).max() < 0.008


def test_cli_text_and_parquet(inputs, uncased_vocab, tmp_path):
    command = [
        sys.executable,
        "-m",
        "bert.pretraining.instances",
        "--input",
        str(tmp_path.parent / "*" / "*.parquet"),
    ]
    output = tmp_path / "cli.hdf5"
    args = [
        "--vocab",
        str(uncased_vocab),
        "--output",
        str(output),
        "--max-seq-length",
        "32",
        "--max-predictions-per-seq",
        "5",
        "--dupe-factor",
        "1",
        "--num-workers",
        "1",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "bert.pretraining.instances", "--input", inputs[0], *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert read_shard(output)["input_ids"].shape[1] == 32
    too_many = subprocess.run(  # the settings' own rule, as the command line names its options
        [
            sys.executable,
            "-m",
            "bert.pretraining.instances",
            "--input",
            inputs[0],
            *args,
            "--max-predictions-per-seq",
            "40",
        ],
        capture_output=True,
        text=True,
    )
    assert too_many.returncode == 1 and too_many.stderr.strip() == (
        "error: bad option: max_predictions_per_seq is 40; it must be at most max_seq_length (32)"
    )
    missing = subprocess.run(
        [*command[:4], str(tmp_path / "nothing.txt"), *args], capture_output=True, text=True
    )
    assert (
        missing.returncode == 1
        and missing.stderr.strip().count("\n") == 0
        and "nothing.txt" in missing.stderr
    )
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"text": ["x"]}), bad)
    wrong = subprocess.run([*command[:4], str(bad), *args], capture_output=True, text=True)
    assert wrong.returncode == 1 and "sentences" in wrong.stderr and "Traceback" not in wrong.stderr
    no_temporary_files = ["bad.parquet", "cli.hdf5"]
    assert sorted(path.name for path in tmp_path.iterdir()) == no_temporary_files


def test_example_settings_hold_their_ranges_and_rule_used_alone():
    """The ranges and the rule params.yaml's examples.<phase> are checked by live on the library's
    type: used without params.yaml, one line names the bare field."""
    with pytest.raises(SettingsError, match=r"^examples: max_seq_length is 4; it must be an integer >= 8$"):
        ExampleConfig(max_seq_length=4)
    with pytest.raises(
        SettingsError, match=r"^examples: masked_lm_prob is 1; it must be a finite number in \(0, 1\)$"
    ):
        ExampleConfig(masked_lm_prob=1)
    with pytest.raises(SettingsError) as error:
        ExampleConfig(max_seq_length=16, max_predictions_per_seq=20)
    assert error.value.naming("examples.phase1.") == (
        "examples.phase1.max_predictions_per_seq is 20; it must be at most examples.phase1.max_seq_length (16)"
    )
