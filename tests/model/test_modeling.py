"""BertConfig, presets, and the behaviour of our BERT models (CPU, fp32, small configs)."""

import json

import pytest
import torch
import torch.nn.functional as F

from bert.errors import UserError
from bert.model.config import BertConfig
from bert.model.network import BertForPreTraining, BertForQuestionAnswering, BertModel

torch.set_num_threads(2)

SMALL = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


def small_config(**overrides) -> BertConfig:
    return BertConfig(**{**SMALL, "max_position_embeddings": 64, **overrides})


def random_batch(config: BertConfig, n=3, s=16, slots=4, seed=0):
    """A padded batch in the HDF5 shard layout: each row has a real length, a few masked slots
    (positions in 1..length-1) and the rest of its slots unused (0)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, config.vocab_size, (n, s), generator=g)
    token_type_ids = torch.zeros(n, s, dtype=torch.long)
    attention_mask = torch.zeros(n, s, dtype=torch.long)
    positions = torch.zeros(n, slots, dtype=torch.long)
    labels = torch.zeros(n, slots, dtype=torch.long)
    for row in range(n):
        length = s - 3 * row
        attention_mask[row, :length] = 1
        token_type_ids[row, length // 2 : length] = 1
        input_ids[row, length:] = 0
        used = slots - row  # row 0 uses every slot, later rows fewer
        chosen = torch.randperm(length - 1, generator=g)[:used] + 1
        positions[row, :used] = chosen.sort().values
        labels[row, :used] = torch.randint(5, config.vocab_size, (used,), generator=g)
    nsp = torch.randint(0, 2, (n,), generator=g)
    return input_ids, token_type_ids, attention_mask, positions, labels, nsp


def shape(config: BertConfig) -> tuple[int, int, int, int]:
    return config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.intermediate_size


def test_presets_have_bert_shapes():
    assert shape(BertConfig.preset("tiny", vocab_size=8192)) == (2, 128, 2, 512)
    assert shape(BertConfig.preset("mini", vocab_size=8192)) == (4, 256, 4, 1024)
    assert shape(BertConfig.preset("large", vocab_size=8192)) == (24, 1024, 16, 4096)
    base = BertConfig.preset("base", vocab_size=30522)
    assert shape(base) == (12, 768, 12, 3072) and base.vocab_size == 30522
    # BERT-base has 110M parameters (109.5M with the NSP head and MLM transform).
    with torch.device("meta"):
        assert 109_000_000 < BertForPreTraining(base).num_parameters() < 111_000_000


def test_resolve_takes_a_preset_or_a_config_file(tmp_path):
    assert BertConfig.resolve("mini", 1000).hidden_size == 256
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps({**SMALL, "model_type": "bert", "architectures": ["BertModel"], "use_cache": True})
    )
    config = BertConfig.resolve(path, vocab_size=500)
    assert config.hidden_size == 32 and config.vocab_size == 500
    assert BertConfig.resolve(tmp_path).hidden_size == 32  # the folder holding config.json
    assert BertConfig.from_json_file(path).to_dict() == small_config(max_position_embeddings=512).to_dict()


@pytest.mark.parametrize("bad", ["huge", "no/such/config.json"])
def test_resolve_names_the_allowed_values(bad):
    with pytest.raises(UserError, match="tiny, mini, base, large"):
        BertConfig.resolve(bad, 100)


def test_bad_config_files_are_user_errors(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**SMALL, "num_attention_heads": 5}))
    with pytest.raises(UserError, match="not a multiple"):
        BertConfig.from_json_file(path)
    path.write_text(json.dumps({**SMALL, "model_type": "roberta"}))
    with pytest.raises(UserError, match="roberta"):
        BertConfig.from_json_file(path)
    path.write_text("{not json")
    with pytest.raises(UserError, match="config.json"):
        BertConfig.from_json_file(path)


def test_init_is_google_style():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.preset("tiny", vocab_size=1000))
    weights = model.bert.layers[0].ffn_in.weight
    assert abs(weights.std().item() - 0.02 * 0.88) < 0.002  # truncated at 2 std: std shrinks to 0.88
    assert weights.abs().max().item() <= 0.04
    assert torch.all(model.bert.layers[0].ffn_in.bias == 0)
    assert torch.all(model.bert.layers[0].attention_norm.weight == 1)
    assert torch.all(model.mlm_bias == 0)


def test_mlm_head_runs_only_on_used_slots_and_the_loss_ignores_the_rest():
    config = small_config()
    torch.manual_seed(0)
    model = BertForPreTraining(config).eval()
    ids, types, mask, positions, labels, nsp = random_batch(config)
    out = model(ids, types, mask, positions, labels, nsp)
    used = positions != 0
    assert out.mlm_logits.shape == (int(used.sum()), config.vocab_size) == (4 + 3 + 2, 97)
    assert torch.equal(out.mlm_labels, labels[used])

    # Reference: the head applied to every token, then read at the used slots in row-major order.
    sequence, pooled = model.bert(ids, types, mask)
    full = F.linear(
        model.mlm_norm(F.gelu(model.mlm_transform(sequence))),
        model.bert.embeddings.word_embeddings.weight,
        model.mlm_bias,
    )
    rows = torch.arange(3)[:, None].expand_as(positions)
    torch.testing.assert_close(out.mlm_logits, full[rows[used], positions[used]], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.mlm_loss, F.cross_entropy(full[rows[used], positions[used]], labels[used]))
    torch.testing.assert_close(out.nsp_loss, F.cross_entropy(model.nsp_classifier(pooled), nsp))
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)

    # Whatever sits in the unused slots' labels does not count.
    garbage = labels.clone()
    garbage[~used] = 42
    assert torch.equal(model(ids, types, mask, positions, garbage, nsp).loss, out.loss)

    # Without labels: logits only.
    bare = model(ids, types, mask, positions)
    assert bare.loss is None and bare.mlm_loss is None and bare.nsp_loss is None and bare.mlm_labels is None
    assert torch.equal(bare.mlm_logits, out.mlm_logits)


@pytest.mark.parametrize("unpad", [False, True])
def test_last_layer_on_output_positions_equals_the_full_encoder(unpad):
    """output_positions: the last layer computes only the rows asked for; their values and every
    parameter's gradient equal those of the full encoder read at the same rows."""
    config = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_hidden_layers=3)
    torch.manual_seed(0)
    model = BertModel(config, unpad=unpad).train()
    ids, types, mask, positions, *_ = random_batch(config)
    wanted = positions  # the unused slots all ask for position 0: repeats are allowed
    rows = torch.arange(3)[:, None].expand_as(wanted)
    weights = torch.randn(*wanted.shape, config.hidden_size)

    def loss_and_grads(subset: bool):
        model.zero_grad()
        sequence, pooled = model(ids, types, mask, output_positions=wanted if subset else None)
        at_wanted = sequence if subset else sequence[rows, wanted]
        (at_wanted * weights).sum().add(pooled.sum()).backward()
        return at_wanted.detach(), pooled.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    full, full_pooled, full_grads = loss_and_grads(subset=False)
    part, part_pooled, part_grads = loss_and_grads(subset=True)
    assert part.shape == (3, positions.shape[1], config.hidden_size)
    torch.testing.assert_close(part, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(part_pooled, full_pooled, atol=1e-5, rtol=1e-5)
    for name, grad in full_grads.items():
        torch.testing.assert_close(part_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_padding_does_not_change_real_tokens():
    config = small_config()
    torch.manual_seed(0)
    model = BertModel(config).eval()
    ids, types, mask, *_ = random_batch(config, n=2, s=12)
    sequence, pooled = model(ids, types, mask)
    # Append 7 more padding positions holding arbitrary token ids: real tokens must not see them.
    pad = torch.randint(5, config.vocab_size, (2, 7))
    longer, longer_pooled = model(
        torch.cat([ids, pad], 1),
        torch.cat([types, torch.ones(2, 7, dtype=torch.long)], 1),
        torch.cat([mask, 0 * pad], 1),
    )
    real = mask.bool()
    torch.testing.assert_close(longer[:, :12][real], sequence[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(longer_pooled, pooled, atol=1e-5, rtol=1e-5)
    # ...while without the mask the padding would change them (the test can fail).
    unmasked, _ = model(torch.cat([ids, pad], 1), None, None)
    assert not torch.allclose(unmasked[:, :12][real], model(ids, None, mask)[0][real], atol=1e-3)


def test_question_answering_loss_ignores_cut_off_answers_and_padding():
    """transformers' rule for answers past the window (ignored), with padding out of the softmax."""
    config = small_config()
    torch.manual_seed(0)
    model = BertForQuestionAnswering(config).eval()
    assert model.bert.pooler is None
    ids, types, mask, *_ = random_batch(config, n=3, s=16)
    assert (mask == 0).any()
    starts, ends = torch.tensor([3, 16, 5]), torch.tensor([4, 20, 9])  # row 1's answer lies past the window
    out = model(ids, types, mask, starts, ends)
    assert out.start_logits.shape == out.end_logits.shape == (3, 16)
    keep = torch.tensor([0, 2])

    def real(logits: torch.Tensor) -> torch.Tensor:
        return logits[keep].masked_fill(mask[keep] == 0, -torch.inf)

    expected = (
        F.cross_entropy(real(out.start_logits), starts[keep])
        + F.cross_entropy(real(out.end_logits), ends[keep])
    ) / 2
    torch.testing.assert_close(out.loss, expected)
    assert model(ids, types, mask).loss is None


def test_sequences_longer_than_the_position_table_are_refused():
    model = BertModel(small_config(max_position_embeddings=8))
    with pytest.raises(UserError, match="max_position_embeddings"):
        model(torch.ones(1, 9, dtype=torch.long))


def test_training_step_reduces_the_loss():
    config = small_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    batch = random_batch(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(20):
        loss = model(*batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    # The decoder is the word embedding matrix: it got gradient through the MLM head as well.
    assert model.bert.embeddings.word_embeddings.weight.grad is not None


def test_apex_layer_norm_falls_back_to_torch_when_apex_is_absent():
    model = BertModel(small_config(), apex_layer_norm=True)
    name = type(model.layers[0].attention_norm).__name__
    assert name in ("LayerNorm", "FusedLayerNorm")


def test_pretrain_step_bench_runs_both_models(tmp_path):
    pytest.importorskip("transformers")
    from bench.pretrain_step import main

    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(SMALL))
    out = tmp_path / "bench.json"
    args = [
        "--size",
        str(config_file),
        "--vocab-size",
        "97",
        "--batch",
        "2",
        "--seq-len",
        "20",
        "--device",
        "cpu",
    ]
    results = main([*args, "--steps", "1", "--warmup", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == results
    assert results["masked_per_seq"] == 3  # round(0.15 x 20)
    assert set(results["models"]) == {"ours", "transformers"} and results["speedup"] > 0
    # MFU: the step's model TFLOP/s over the matmul peak measured in the same run.
    ours, peak = results["models"]["ours"], results["matmul_peak"]["tflops"]
    assert ours["model_tflops_per_second"] == pytest.approx(
        results["model_tflops_per_step"] / ours["ms_per_step"] * 1e3
    )
    assert ours["mfu"] == pytest.approx(ours["model_tflops_per_second"] / peak) and ours["mfu"] > 0
    unpadded = main(
        [*args, "--models", "ours,ours_unpadded", "--steps", "1", "--warmup", "0", "--rounds", "1"]
    )
    assert set(unpadded["models"]) == {"ours", "ours_unpadded"} and "speedup" not in unpadded
