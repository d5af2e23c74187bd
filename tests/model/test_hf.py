"""Hugging Face interop: our BERT loads HF checkpoints with HF's outputs, and what we save loads
in `transformers` with our outputs (CPU, fp32, eval mode)."""

import json
import logging
import os
import stat

import pytest
import torch

from bert.errors import UserError
from bert.model.config import BertConfig
from bert.model.hf import to_hf_state_dict
from bert.model.network import BertForPreTraining, BertForQuestionAnswering, BertModel
from bert.text.tokenization import load_tokenizer

transformers = pytest.importorskip("transformers")
torch.set_num_threads(2)

SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    (
        "Where was Marie Curie born?",
        "Maria Skłodowska was born in Warsaw, in the Kingdom of Poland, in 1867.",
    ),
    ("BERT", None),
    ("Tokenisation splits unaffordable words into wordpieces.", "It keeps frequent ones whole."),
]


def padded_batch(vocab_file):
    """Real sentences (single and pairs) tokenised with our tokenizer, padded to the longest."""
    tokenizer = load_tokenizer(vocab_file)
    encodings = [tokenizer.encode(a) if b is None else tokenizer.encode(a, b) for a, b in SENTENCES]
    length = max(len(e.ids) for e in encodings)
    input_ids = torch.zeros(len(encodings), length, dtype=torch.long)
    token_type_ids, attention_mask = torch.zeros_like(input_ids), torch.zeros_like(input_ids)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        input_ids[row, :n] = torch.tensor(encoding.ids)
        token_type_ids[row, :n] = torch.tensor(encoding.type_ids)
        attention_mask[row, :n] = 1
    assert attention_mask.sum(1).min() < length  # some rows really are padded
    return input_ids, token_type_ids, attention_mask


def masked_positions(attention_mask, slots=5, seed=0):
    """Up to `slots` masked positions per row among its real tokens (never 0); unused slots 0."""
    g = torch.Generator().manual_seed(seed)
    positions = torch.zeros(len(attention_mask), slots, dtype=torch.long)
    for row, length in enumerate(attention_mask.sum(1).tolist()):
        used = min(slots - row % 2, length - 2)
        positions[row, :used] = (torch.randperm(length - 2, generator=g)[:used] + 1).sort().values
    return positions


def train_a_little(model, loss_of_batch, steps=4):
    """A few AdamW steps with dropout on, so the saved weights are not the initialisation."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = loss_of_batch()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.fixture(scope="module")
def batch(uncased_vocab):
    return padded_batch(uncased_vocab)


def test_minilm_checkpoint_gives_transformers_hidden_states(minilm_dir, batch):
    input_ids, token_type_ids, attention_mask = batch
    ours = BertModel.from_pretrained(minilm_dir)
    theirs = transformers.BertModel.from_pretrained(minilm_dir).eval()
    assert not ours.training
    with torch.no_grad():
        sequence, pooled = ours(input_ids, token_type_ids, attention_mask)
        expected = theirs(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask)
    real = attention_mask.bool()
    assert sequence.shape == (4, input_ids.shape[1], 384)
    torch.testing.assert_close(sequence[real], expected.last_hidden_state[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(pooled, expected.pooler_output, atol=1e-5, rtol=0)
    assert sequence[real].std() > 0.1  # real activations, not a degenerate zero match


@pytest.fixture(scope="module")
def trained_pretraining_model(batch):
    input_ids, token_type_ids, attention_mask = batch
    positions = masked_positions(attention_mask)
    labels = torch.randint(1000, 2000, positions.shape) * (positions != 0)
    nsp = torch.tensor([0, 1, 1, 0])
    torch.manual_seed(1)
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=30522))
    train_a_little(
        model, lambda: model(input_ids, token_type_ids, attention_mask, positions, labels, nsp).loss
    )
    return model, (input_ids, token_type_ids, attention_mask, positions, labels, nsp)


def test_exported_pretraining_model_gives_the_same_logits_in_transformers(
    trained_pretraining_model, tmp_path, uncased_vocab
):
    model, (input_ids, token_type_ids, attention_mask, positions, labels, nsp) = trained_pretraining_model
    model.save_pretrained(tmp_path / "exported", vocab_file=uncased_vocab)
    theirs, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path / "exported", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert theirs.cls.predictions.decoder.weight is theirs.bert.embeddings.word_embeddings.weight

    used = positions != 0
    # HF's labels: the masked token at its position, -100 (ignored) everywhere else.
    hf_labels = torch.full_like(input_ids, -100)
    hf_labels.scatter_(1, positions, labels)
    hf_labels[:, 0] = -100  # unused slots scattered into position 0
    with torch.no_grad():
        ours = model(input_ids, token_type_ids, attention_mask, positions, labels, nsp)
        expected = theirs.eval()(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            attention_mask=attention_mask,
            labels=hf_labels,
            next_sentence_label=nsp,
        )
    rows = torch.arange(len(input_ids))[:, None].expand_as(positions)
    torch.testing.assert_close(
        ours.mlm_logits, expected.prediction_logits[rows[used], positions[used]], atol=1e-5, rtol=0
    )
    torch.testing.assert_close(ours.nsp_logits, expected.seq_relationship_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.loss, expected.loss, atol=1e-5, rtol=0)

    # The tokenizer files make a transformers tokenizer that agrees with ours.
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "exported")
    text = "Tokenisation splits unaffordable words."
    assert hf_tokenizer(text)["input_ids"] == load_tokenizer(uncased_vocab).encode(text).ids


def test_exported_question_answering_model_gives_the_same_logits_in_transformers(batch, tmp_path):
    input_ids, token_type_ids, attention_mask = batch
    starts, ends = torch.tensor([1, 3, 0, 2]), torch.tensor([2, 6, 0, 5])
    torch.manual_seed(2)
    model = BertForQuestionAnswering(BertConfig.preset("tiny", vocab_size=30522))
    train_a_little(model, lambda: model(input_ids, token_type_ids, attention_mask, starts, ends).loss)
    model.save_pretrained(tmp_path / "qa")
    theirs, info = transformers.BertForQuestionAnswering.from_pretrained(
        tmp_path / "qa", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        ours = model(input_ids, token_type_ids, attention_mask, starts, ends)
        expected = theirs.eval()(
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            attention_mask=attention_mask,
            start_positions=starts,
            end_positions=ends,
        )
    torch.testing.assert_close(ours.start_logits, expected.start_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.end_logits, expected.end_logits, atol=1e-5, rtol=0)
    # Our loss leaves padding out of the softmax (transformers' keeps it): the same loss from
    # transformers' logits with the padded positions removed.
    assert (attention_mask == 0).any()  # the batch is padded: the two losses would differ

    def without_padding(logits: torch.Tensor) -> torch.Tensor:
        return logits.masked_fill(attention_mask == 0, -torch.inf)

    expected_loss = (
        torch.nn.functional.cross_entropy(without_padding(expected.start_logits), starts)
        + torch.nn.functional.cross_entropy(without_padding(expected.end_logits), ends)
    ) / 2
    torch.testing.assert_close(ours.loss, expected_loss, atol=1e-5, rtol=0)
    row = int(attention_mask.sum(1).argmax())
    longest = slice(row, row + 1)
    assert attention_mask[longest].all()  # the longest window has no padding: transformers' own loss
    with torch.no_grad():
        ours_one = model(input_ids[longest], token_type_ids[longest], attention_mask[longest], starts[longest], ends[longest])  # fmt: skip
        theirs_one = theirs(input_ids=input_ids[longest], token_type_ids=token_type_ids[longest],
                            attention_mask=attention_mask[longest], start_positions=starts[longest],
                            end_positions=ends[longest])  # fmt: skip
    torch.testing.assert_close(ours_one.loss, theirs_one.loss, atol=1e-5, rtol=0)


@pytest.mark.parametrize("cls", [BertModel, BertForPreTraining, BertForQuestionAnswering])
def test_save_then_load_is_exact(cls, tmp_path):
    torch.manual_seed(3)
    model = cls(
        BertConfig(
            vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
        )
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))  # nothing left at its init value
    model.save_pretrained(tmp_path / "model")
    loaded = cls.from_pretrained(tmp_path / "model")
    assert loaded.config == model.config
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["architectures"] == [cls.__name__] and config["model_type"] == "bert"
    for (name, expected), (loaded_name, value) in zip(
        model.state_dict().items(), loaded.state_dict().items()
    ):
        assert name == loaded_name and torch.equal(value, expected), name


def test_saving_again_replaces_the_directory_atomically(tmp_path):
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(tmp_path / "out", vocab_file=None)
    (tmp_path / "out" / "stale.txt").write_text("left from before")
    second = BertModel(config)
    second.save_pretrained(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temp folders left behind
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["config.json", "model.safetensors"]
    assert torch.equal(BertModel.from_pretrained(tmp_path / "out").pooler.weight, second.pooler.weight)


def test_every_file_of_a_saved_model_is_world_readable(tmp_path):
    # safetensors' save_file writes model.safetensors 0600; the saved folder is an ordinary one.
    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n")
    previous = os.umask(0o022)
    try:
        BertModel(config).save_pretrained(tmp_path / "out", vocab_file=vocab)
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "out").iterdir()}
    assert modes == {
        "config.json": 0o644,
        "model.safetensors": 0o644,
        "tokenizer_config.json": 0o644,
        "vocab.txt": 0o644,
    }
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755


def test_old_checkpoints_load_gamma_beta_bin_and_prefixes(trained_pretraining_model, tmp_path):
    """A TF-converted style checkpoint: pytorch_model.bin, LayerNorm gamma/beta, the tied decoder
    stored explicitly, and the encoder without its `bert.` prefix."""
    model, batch = trained_pretraining_model
    old = {}
    for key, tensor in to_hf_state_dict(model).items():
        key = key.removeprefix("bert.")
        key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        old[key] = tensor
    old["cls.predictions.decoder.weight"] = old["embeddings.word_embeddings.weight"]
    old["embeddings.position_ids"] = torch.arange(512)[None]
    (tmp_path / "old").mkdir()
    torch.save(old, tmp_path / "old" / "pytorch_model.bin")
    (tmp_path / "old" / "config.json").write_text(json.dumps(model.config.to_dict()))
    loaded = BertForPreTraining.from_pretrained(tmp_path / "old")
    with torch.no_grad():
        torch.testing.assert_close(loaded(*batch).mlm_logits, model(*batch).mlm_logits, atol=0, rtol=0)


def test_missing_heads_start_fresh_with_a_warning(minilm_dir, trained_pretraining_model, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bert.model.hf"):
        pretraining = BertForPreTraining.from_pretrained(minilm_dir)
    assert "freshly initialised: mlm_transform.weight" in caplog.text
    assert "nsp_classifier.weight" in caplog.text
    reference = BertModel.from_pretrained(minilm_dir)
    assert torch.equal(pretraining.bert.layers[5].ffn_out.weight, reference.layers[5].ffn_out.weight)
    assert torch.equal(pretraining.bert.pooler.weight, reference.pooler.weight)

    # Fine-tuning from a pretraining checkpoint: the MLM/NSP heads and the pooler are listed as unused.
    model, _ = trained_pretraining_model
    model.save_pretrained(tmp_path / "pretrained")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bert.model.hf"):
        qa = BertForQuestionAnswering.from_pretrained(tmp_path / "pretrained")
    assert "freshly initialised: qa_outputs.weight, qa_outputs.bias" in caplog.text
    assert "not used by BertForQuestionAnswering: bert.pooler.dense.bias" in caplog.text
    assert "cls.seq_relationship.weight" in caplog.text
    assert torch.equal(
        qa.bert.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight
    )


def test_unloadable_directories_are_user_errors(tmp_path, trained_pretraining_model):
    with pytest.raises(UserError, match="model directory not found"):
        BertModel.from_pretrained(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(
        json.dumps({"hidden_size": 128, "num_attention_heads": 2})
    )
    with pytest.raises(UserError, match="no model.safetensors or pytorch_model.bin"):
        BertModel.from_pretrained(tmp_path / "empty")

    model, _ = trained_pretraining_model
    model.save_pretrained(tmp_path / "tiny")
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    (tmp_path / "tiny" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(UserError, match="lack .* encoder tensors"):
        BertForPreTraining.from_pretrained(tmp_path / "tiny")
    (tmp_path / "tiny" / "config.json").write_text(json.dumps({**config, "intermediate_size": 256}))
    with pytest.raises(UserError, match="do not match config.json"):
        BertForPreTraining.from_pretrained(tmp_path / "tiny")
    (tmp_path / "tiny" / "model.safetensors").write_bytes(b"truncated")
    with pytest.raises(UserError, match=r"not a safetensors file \(truncated or another format\)"):
        BertForPreTraining.from_pretrained(tmp_path / "tiny")
