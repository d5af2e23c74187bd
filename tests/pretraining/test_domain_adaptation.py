"""Continued pretraining from released weights, and MLM-only pretraining.

- From the real MiniLM checkpoint (its encoder; heads fresh, the decoder tied), the loss the
  trainer minimises equals transformers' BertForPreTraining / BertForMaskedLM loss on one batch.
- MLM-only examples are packed full sentences without next-sentence labels, masked up to 50%.
"""

import numpy as np
import pytest
import torch
from safetensors import safe_open

from bert.model.network import BertForPreTraining
from bert.pretraining.examples import ExampleConfig
from bert.pretraining.hdf5 import read_shard
from bert.pretraining.instances import write_instances
from bert.pretraining.loader import PretrainingData
from bert.pretraining.loss import pretraining_objective
from bert.text.tokenization import load_tokenizer
from tests.model.test_hf import masked_positions, padded_batch

transformers = pytest.importorskip("transformers")
torch.set_num_threads(2)

# Sentences with distinct first words and a final full stop: an instance that starts and ends on
# whole sentences starts with one of FIRST_WORDS and ends with ".".
FIRST_WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
DOCUMENTS = [
    [f"{FIRST_WORDS[(d + s) % 10]} {' '.join(['river', 'stone', 'light'][: 1 + (d * s) % 3])} was seen "
     f"in document {d} as sentence {s} of the corpus." for s in range(3 + d % 4)]
    for d in range(12)
]  # fmt: skip


def trainer_loss(model, batch) -> torch.Tensor:
    """The loss bert.training.loop.train minimises for one micro-batch: the sum of the objective's terms."""
    terms, _ = pretraining_objective.loss(model, batch)
    return sum(terms.values())


@pytest.mark.parametrize("next_sentence", [True, False], ids=["mlm+nsp", "mlm-only"])
def test_loss_from_a_released_checkpoint_equals_transformers(
    minilm_dir, uncased_vocab, tmp_path, next_sentence
):
    torch.manual_seed(0)  # the fresh heads, as stages.pretrain seeds them
    ours = BertForPreTraining.from_pretrained(minilm_dir, next_sentence=next_sentence)
    assert (ours.nsp_classifier is not None) == next_sentence and (
        ours.bert.pooler is not None
    ) == next_sentence
    ours.save_pretrained(tmp_path / "continued", vocab_file=uncased_vocab)
    kind = transformers.BertForPreTraining if next_sentence else transformers.BertForMaskedLM
    theirs, info = kind.from_pretrained(tmp_path / "continued", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight
    # MiniLM's encoder is what was loaded: its word embeddings, untouched
    released = safe_open(minilm_dir / "model.safetensors", "pt").get_tensor(
        "embeddings.word_embeddings.weight"
    )
    assert torch.equal(theirs.bert.embeddings.word_embeddings.weight, released)

    input_ids, token_type_ids, attention_mask = padded_batch(uncased_vocab)
    positions = masked_positions(attention_mask)
    labels = input_ids.gather(1, positions) * (positions != 0)
    masked = input_ids.scatter(1, positions, 103) * attention_mask  # [MASK]; unused slots hit [CLS]
    masked[:, 0] = input_ids[:, 0]
    batch = {"input_ids": masked, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
             "masked_lm_positions": positions, "masked_lm_ids": labels}  # fmt: skip
    hf_labels = torch.full_like(input_ids, -100).scatter(1, positions, labels)
    hf_labels[:, 0] = -100  # where the unused slots were scattered
    extra = {}
    if next_sentence:
        batch["next_sentence_labels"] = torch.tensor([0, 1, 1, 0])
        extra["next_sentence_label"] = batch["next_sentence_labels"]
    with torch.no_grad():
        got = trainer_loss(ours.eval(), batch)
        want = theirs.eval()(input_ids=masked, token_type_ids=token_type_ids, attention_mask=attention_mask,
                             labels=hf_labels, **extra).loss  # fmt: skip
    assert abs(got.item() - want.item()) < 1e-5, (got.item(), want.item())
    assert 5 < got.item() < 30  # a real loss from fresh heads, not a degenerate match


@pytest.fixture(scope="module")
def packed(uncased_vocab, tmp_path_factory):
    """MLM-only examples of DOCUMENTS: unmasked (dynamic) and masked at 30% (static)."""
    folder = tmp_path_factory.mktemp("packed")
    shards = {}
    for name, dynamic in (("unmasked", True), ("masked", False)):
        config = ExampleConfig(max_seq_length=48, max_predictions_per_seq=20, masked_lm_prob=0.3, dupe_factor=2,
                               masking="dynamic" if dynamic else "static", next_sentence=False)  # fmt: skip
        batches = [(DOCUMENTS, list(range(len(DOCUMENTS))))]
        stats = write_instances(batches, folder / f"{name}.hdf5", uncased_vocab, True, config, (7, 0))
        shards[name] = (folder / f"{name}.hdf5", stats)
    return shards


def test_mlm_only_instances_are_packed_full_sentences_without_nsp_labels(packed, uncased_vocab):
    path, stats = packed["unmasked"]
    shard = read_shard(path)
    assert "next_sentence_labels" not in shard and stats.random_next == 0
    tokenizer = load_tokenizer(uncased_vocab)
    cls, sep, period = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "."))
    firsts = {tokenizer.encode(word, add_special_tokens=False).ids[0] for word in FIRST_WORDS}
    lengths = shard["input_mask"].sum(axis=1)
    assert (shard["segment_ids"] == 0).all() and (lengths <= 48).all()
    content = 0
    for row, length in zip(shard["input_ids"], lengths):
        assert row[0] == cls and row[length - 1] == sep and (row[length:] == 0).all()
        # whole sentences: each piece (split at the [SEP] between documents) starts a sentence, ends one
        pieces = np.split(row[1 : length - 1], np.flatnonzero(row[1 : length - 1] == sep))
        for piece in pieces:
            piece = piece[piece != sep]
            assert piece[0] in firsts and piece[-1] == period, tokenizer.decode(piece.tolist())
            content += len(piece)
    # every token of every document, once per dupe_factor pass, and instances filled to the brim:
    # an instance ends only when the next sentence does not fit
    document_tokens = sum(
        len(tokenizer.encode(s, add_special_tokens=False).ids) for d in DOCUMENTS for s in d
    )
    assert content == 2 * document_tokens
    assert lengths[:-1].mean() > 40


def test_mlm_only_masks_up_to_half_and_loads_without_nsp(packed):
    path, _ = packed["masked"]
    shard = read_shard(path)
    masked = (shard["masked_lm_positions"] != 0).sum(axis=1)
    real = shard["input_mask"].sum(axis=1)
    assert 0.27 < (masked / real).mean() < 0.33  # masked_lm_prob 0.3 (capped by max_predictions 20)
    data = PretrainingData([path], global_batch_size=4, micro_batch_size=4, seed=0)
    batch = next(iter(data))
    assert "next_sentence_labels" not in batch
    assert set(pretraining_objective.items(batch)) == {"mlm_loss"}
    assert ExampleConfig(masked_lm_prob=0.5, next_sentence=False).masked_lm_prob == 0.5


def test_mlm_only_continuation_carries_the_released_pooler_to_the_export(minilm_dir, tmp_path, caplog):
    """MiniLM's pooler is trained, but an MLM-only run holds none: each phase's save carries it on
    unchanged, so fine-tuning starts from the released pooler, not a fresh one."""
    from bert.model.hf import untrained_tensors
    from bert.model.network import BertForSequenceClassification

    released = safe_open(minilm_dir / "model.safetensors", "pt")
    start = minilm_dir
    for save in ("phase1", "phase2"):
        caplog.clear()
        with caplog.at_level("INFO", logger="bert.model.hf"):
            model = BertForPreTraining.from_pretrained(start, next_sentence=False)
        # the pooler is carried, so the load does not call it unused
        assert "not used by" not in caplog.text
        assert (
            "not held by BertForPreTraining (its objective does not train them); the pretraining stage carries "
            "them unchanged to its export: bert.pooler.dense.bias, bert.pooler.dense.weight" in caplog.text
        )
        with torch.no_grad():  # training moves every tensor the objective reaches
            for parameter in model.parameters():
                parameter.add_(0.01)
        with caplog.at_level("INFO", logger="bert.model.hf"):
            carried = untrained_tensors(start, model)
        assert sorted(carried) == ["bert.pooler.dense.bias", "bert.pooler.dense.weight"]
        assert "carried unchanged: bert.pooler.dense.bias, bert.pooler.dense.weight" in caplog.text
        model.save_pretrained(tmp_path / save, vocab_file=minilm_dir / "vocab.txt", carried=carried)
        start = tmp_path / save
    classifier = BertForSequenceClassification.from_pretrained(start, num_labels=2)
    assert torch.equal(classifier.bert.pooler.weight, released.get_tensor("pooler.dense.weight"))
    assert torch.equal(classifier.bert.pooler.bias, released.get_tensor("pooler.dense.bias"))
    # the encoder is the trained one, not the released one
    assert not torch.equal(
        classifier.bert.embeddings.word_embeddings.weight,
        released.get_tensor("embeddings.word_embeddings.weight"),
    )
    with pytest.raises(ValueError, match="carried tensors the model holds itself"):
        classifier.save_pretrained(tmp_path / "clash", carried={"bert.pooler.dense.bias": torch.zeros(1)})
