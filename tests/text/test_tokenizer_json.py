"""A Hugging Face tokenizer.json as the vocabulary (a byte-level BPE, as ModernBERT's): trained by
the vocab stage, taken from a weights folder, and used by example creation (its special tokens and
template, whole-word masking from word ids), SQuAD windows (offsets) and task features, with the
ids and type ids transformers' PreTrainedTokenizerFast gives for the same file."""

import json

import numpy as np
import pytest

from bert.errors import UserError
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.instances import create_from_files
from bert.squad.dataset import Answer, SquadExample
from bert.squad.features import make_features as squad_features
from bert.tasks.catalogue import TASKS
from bert.tasks.data import read_split
from bert.tasks.features import make_features as task_features
from bert.text.tokenization import TokenLayout, load_tokenizer_from_dir
from bert.text.vocab import prepare_vocab, released_lower_case

WORDS = " ".join(
    [
        "the of and a in to was is for on as by with he at from his an were are which this be has or had",
        "tokenisation unaffable pretraining hyperparameters wordpieces encyclopaedia transformer",
        "river mountain village railway station harbour cathedral university",
    ]
).split()
MAX_SEQ, MAX_PRED = 48, 8


def documents(seed: int, count: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [
        [" ".join(rng.choice(WORDS, size=rng.integers(3, 14))) + "." for _ in range(rng.integers(2, 9))]
        for _ in range(count)
    ]


def sentences():
    return (sentence for document in documents(0, 200) for sentence in document)


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory):
    """The vocab stage's output for vocab.kind: bpe, lower-cased."""
    folder = tmp_path_factory.mktemp("bpe") / "vocab"
    path = prepare_vocab(
        "train", folder, True, kind="bpe", sentences=sentences, vocab_size=400, min_frequency=2
    )
    assert path.name == "tokenizer.json"
    return folder


@pytest.fixture(scope="module")
def tokenizer(bpe_dir):
    return load_tokenizer_from_dir(bpe_dir)[0]


def test_vocab_stage_trains_bpe_deterministically_with_bert_specials(bpe_dir, tmp_path):
    again = prepare_vocab(
        "train", tmp_path / "v", True, kind="bpe", sentences=sentences, vocab_size=400, min_frequency=2
    )
    assert again.read_bytes() == (bpe_dir / "tokenizer.json").read_bytes()
    tokenizer, lower_case = load_tokenizer_from_dir(bpe_dir, default_lower_case=False)
    assert lower_case is True and tokenizer.get_vocab_size() <= 400
    layout = TokenLayout.of(tokenizer)
    vocab = tokenizer.get_vocab()
    assert [layout.pad, layout.unk, layout.cls, layout.sep, layout.mask] == [0, 1, 2, 3, 4]
    assert layout.kind == "bpe" and layout.pair_types == ((0,), 0, (0,), 1, (1,))
    assert "Ġstation" in vocab  # byte-level pieces keep the space in front of a word
    assert tokenizer.encode("Railway ÜBER").tokens[0] == "[CLS]"  # no unknown bytes, lower-cased
    assert not set(layout.replaceable_ids()) & {0, 1, 2, 3, 4}


def test_transformers_reads_the_same_ids_and_types(bpe_dir, tokenizer):
    transformers = pytest.importorskip("transformers")
    theirs = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(bpe_dir / "tokenizer.json"), model_input_names=["input_ids", "token_type_ids"]
    )
    pairs = read_split(
        TASKS["rte"], _rte(bpe_dir.parent, [("the river was", "a harbour town"), ("unaffable", "x")])
    )
    features = task_features(pairs, tokenizer, max_seq_length=24, multiple_choice=False, progress=False)
    for row, (first, second) in enumerate(zip(pairs.first, pairs.second)):
        expected = theirs(first, second[0])
        length = len(expected["input_ids"])
        assert features.input_ids[row, :length].tolist() == expected["input_ids"]
        assert features.token_type_ids[row, :length].tolist() == expected["token_type_ids"]
        assert (features.input_ids[row, length:] == 0).all() and features.attention_mask[row].sum() == length


def _rte(folder, rows):
    path = folder / "dev.tsv"
    lines = ["index\tsentence1\tsentence2\tlabel"] + [
        f"{i}\t{a}\t{b}\tentailment" for i, (a, b) in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def shard(bpe_dir, tmp_path_factory):
    """Static whole-word-masked pairs, and the same instances unmasked (dynamic masking stores them so)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bert.pretraining.hdf5 import read_shard

    folder = tmp_path_factory.mktemp("examples")
    table = documents(3, 120)
    source = folder / "train_00000.parquet"
    pq.write_table(pa.table({"doc_id": [f"d{i}" for i in range(len(table))], "sentences": table}), source)
    vocab = bpe_dir / "tokenizer.json"
    shards = []
    for name, dynamic in (("masked", False), ("plain", True)):
        config = ExampleConfig(
            MAX_SEQ, MAX_PRED, dupe_factor=2, whole_word_mask=True, masking="dynamic" if dynamic else "static"
        )
        create_from_files([str(source)], folder / f"{name}.hdf5", vocab, True, config, seed=7, num_workers=1)
        shards.append(read_shard(folder / f"{name}.hdf5"))
    return shards


def test_examples_place_the_tokenizers_specials_and_mask_whole_words(shard, tokenizer):
    masked, plain = shard
    layout = TokenLayout.of(tokenizer)
    ids, real = plain["input_ids"], plain["input_mask"].astype(bool)
    lengths = real.sum(axis=1)
    rows = np.arange(len(ids))
    assert (ids[:, 0] == layout.cls).all() and (ids[rows, lengths - 1] == layout.sep).all()
    assert ((ids == layout.sep) & real).sum(axis=1).tolist() == [2] * len(ids)  # A [SEP] B [SEP]
    assert (ids[~real] == layout.pad).all()
    b_start = np.argmax(ids == layout.sep, axis=1) + 1
    assert (plain["segment_ids"] == ((np.arange(MAX_SEQ) >= b_start[:, None]) & real)).all()

    chosen = np.zeros(ids.shape, dtype=bool)
    slot_rows, slots = np.nonzero(masked["masked_lm_ids"])
    chosen[slot_rows, masked["masked_lm_positions"][slot_rows, slots]] = True
    assert not chosen[np.isin(ids, layout.special_ids) | ~real].any()  # never a special token or padding
    assert (masked["masked_lm_ids"][slot_rows, slots] == ids[chosen]).all()
    assert 0.08 < chosen.sum() / (lengths.sum()) < 0.16  # 15% of the tokens, fewer where words overshoot
    replaced = masked["input_ids"][chosen]
    assert (replaced == layout.mask).mean() > 0.6
    assert not np.isin(replaced[replaced != layout.mask], layout.special_ids).any()
    # a piece that does not start a word ("Ġ" or ".") is masked exactly when the piece before it is
    tokens = np.array([tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size())])
    special = np.isin(ids, layout.special_ids)
    continues = ~np.char.startswith(tokens[ids], "Ġ") & (tokens[ids] != ".") & real & ~special
    continues[:, 1:] &= ~special[:, :-1] & (tokens[ids[:, :-1]] != ".")
    continues[:, 0] = False
    assert continues.sum() > 200 and (chosen & continues).sum() > 10
    assert (chosen[:, 1:][continues[:, 1:]] == chosen[:, :-1][continues[:, 1:]]).all()


def test_squad_windows_recover_answers_from_offsets(tokenizer):
    context = "The railway station of the village was built in 1856, near the harbour cathedral."
    answers = ["railway station", "1856", "harbour cathedral", "village"]
    examples = [
        SquadExample(f"q{i}", "t", "which place is it?", context, [Answer(text, context.index(text))])
        for i, text in enumerate(answers)
    ]
    features = squad_features(
        examples, tokenizer, max_seq_length=24, doc_stride=6, max_query_length=8, progress=False
    )
    layout = TokenLayout.of(tokenizer)
    found = {}
    for f in range(len(features)):
        start, end = features.start_positions[f], features.end_positions[f]
        assert features.input_ids[f, 0] == layout.cls
        if start:
            text = context[features.offsets[f, start, 0] : features.offsets[f, end, 1]]
            found[answers[features.example_index[f]]] = text
            assert features.token_type_ids[f, start] == 1
    assert found == {text: text for text in answers}


def test_lower_case_contradicting_a_tokenizer_json_is_one_line(bpe_dir, tmp_path):
    with pytest.raises(UserError) as error:
        prepare_vocab(f"file:{bpe_dir / 'tokenizer.json'}", tmp_path / "out", False)
    message = str(error.value)
    assert "vocab.lower_case is false" in message and "vocab.source" in message
    assert "set vocab.lower_case: true" in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_weights_source_takes_a_folder_with_only_tokenizer_json(bpe_dir, tmp_path):
    folder = tmp_path / "modernbert"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((bpe_dir / "tokenizer.json").read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"mask_token": "[MASK]"}))
    assert released_lower_case(str(folder), tmp_path) is None  # its tokenizer.json says, not a BERT default
    path = prepare_vocab("weights", tmp_path / "vocab", True, url=str(folder))
    assert path.read_bytes() == (folder / "tokenizer.json").read_bytes()
    assert sorted(p.name for p in (tmp_path / "vocab").iterdir()) == [
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    with pytest.raises(UserError, match="neither vocab.txt nor tokenizer.json"):
        prepare_vocab("weights", tmp_path / "none", True, url=str(tmp_path / "empty"))


def test_a_bpe_run_through_the_stages_carries_its_tokenizer_json(tmp_path):
    """vocab.kind: bpe through the real stage commands: the vocab stage trains it, examples use its
    ids, and the pretrained model folder holds it, which fine-tuning then loads."""
    from bert.pretraining.hdf5 import read_shard
    from tests.support.stage_workspace import run_stage, set_params
    from tests.test_faults import _examples_workspace

    root = _examples_workspace(tmp_path / "project")
    (root / "data/vocab/vocab.txt").unlink()
    # dynamic masking: the pretraining loader masks with the tokenizer's ids
    set_params(
        root,
        {
            "vocab.kind": "bpe",
            "vocab.source": "train",
            "vocab.vocab_size": 300,
            "examples.masking": "dynamic",
        },
    )
    for stage in (
        ("stages.vocab",),
        ("stages.examples", "phase1"),
        ("stages.init_random",),
        ("stages.pretrain", "phase1"),
    ):
        result = run_stage(root, *stage)
        assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (root / "data/vocab").iterdir()) == [
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    tokenizer = load_tokenizer_from_dir(root / "data/vocab")[0]
    layout = TokenLayout.of(tokenizer)
    shard = read_shard(sorted((root / "data/examples/phase1").glob("*.hdf5"))[0])
    assert (shard["input_ids"][:, 0] == layout.cls).all() and shard[
        "input_ids"
    ].max() < tokenizer.get_vocab_size()
    for folder in ("random", "phase1"):
        saved = root / "data/weights" / folder
        assert (saved / "tokenizer.json").read_bytes() == (root / "data/vocab/tokenizer.json").read_bytes()
        assert not (saved / "vocab.txt").exists()
        assert json.loads((saved / "config.json").read_text())["vocab_size"] == tokenizer.get_vocab_size()
    # transformers reads the exported folder's tokenizer with its special tokens
    transformers = pytest.importorskip("transformers")
    theirs = transformers.AutoTokenizer.from_pretrained(root / "data/weights/phase1")
    assert (theirs.mask_token_id, theirs.pad_token_id, theirs.cls_token_id) == (
        layout.mask,
        layout.pad,
        layout.cls,
    )
    assert theirs("the river", "a town")["input_ids"] == tokenizer.encode("the river", "a town").ids


@pytest.fixture(scope="module")
def roberta_style(tmp_path_factory):
    """A byte-level BPE with RoBERTa's names and template: `<s> A </s></s> B </s>`, all type id 0."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, processors, trainers
    from tokenizers.models import BPE

    tokenizer = Tokenizer(BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(sentences(), trainer=trainer)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    path = tmp_path_factory.mktemp("roberta") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def test_another_template_lays_out_tasks_and_squad_and_refuses_pairs(roberta_style, tmp_path):
    from bert.text.tokenization import load_tokenizer

    tokenizer = load_tokenizer(roberta_style)
    layout = TokenLayout.of(tokenizer)
    assert (layout.cls, layout.sep, layout.pad, layout.mask) == (0, 2, 1, 4)
    assert layout.pair_between == (2, 2) and layout.pair_types == ((0,), 0, (0, 0), 0, (0,))
    transformers = pytest.importorskip("transformers")
    theirs = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(roberta_style), model_input_names=["input_ids", "token_type_ids"]
    )
    pairs = read_split(TASKS["rte"], _rte(tmp_path, [("the river was", "a harbour town")]))
    features = task_features(pairs, tokenizer, max_seq_length=16, multiple_choice=False, progress=False)
    expected = theirs("the river was", "a harbour town")
    length = len(expected["input_ids"])
    assert features.input_ids[0, :length].tolist() == expected["input_ids"]
    assert features.token_type_ids[0].tolist() == [0] * 16 and (features.input_ids[0, length:] == 1).all()

    context = "The railway station of the village was built near the harbour cathedral."
    example = SquadExample(
        "q", "t", "which?", context, [Answer("harbour cathedral", context.index("harbour"))]
    )
    window = squad_features(
        [example], tokenizer, max_seq_length=32, doc_stride=8, max_query_length=8, progress=False
    )
    start, end = window.start_positions[0], window.end_positions[0]
    assert context[window.offsets[0, start, 0] : window.offsets[0, end, 1]] == "harbour cathedral"
    question = len(tokenizer.encode("which?", add_special_tokens=False).ids)
    assert window.input_ids[0, question + 1 : question + 3].tolist() == [2, 2]  # `<s> q </s></s> context`

    source = tmp_path / "train.txt"
    source.write_text("\n\n".join("\n".join(d) for d in documents(4, 20)) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="set examples.next_sentence: false"):
        create_from_files(
            [str(source)], tmp_path / "pairs.hdf5", roberta_style, False, ExampleConfig(32, 4), 1, 1
        )
    packed = ExampleConfig(32, 4, next_sentence=False, dupe_factor=1)
    create_from_files([str(source)], tmp_path / "packed.hdf5", roberta_style, False, packed, 1, 1)
    from bert.pretraining.hdf5 import read_shard

    shard = read_shard(tmp_path / "packed.hdf5")
    real = shard["input_mask"].astype(bool)
    assert (shard["input_ids"][:, 0] == 0).all() and (shard["input_ids"][~real] == 1).all()


def test_sentence_encoder_gives_each_sentences_ids_and_word_starts(tokenizer):
    from bert.text.tokenization import SentenceEncoder

    batch = [sentence for document in documents(5, 10) for sentence in document] + [""]
    ids, lengths, word_start = SentenceEncoder(tokenizer).encode(batch)
    encodings = [tokenizer.encode(sentence, add_special_tokens=False) for sentence in batch]
    assert lengths.tolist() == [len(e.ids) for e in encodings]
    assert ids.tolist() == [i for e in encodings for i in e.ids]
    expected = [w != (e.word_ids[k - 1] if k else None) for e in encodings for k, w in enumerate(e.word_ids)]
    assert word_start.tolist() == expected and 0 < word_start.mean() < 1
