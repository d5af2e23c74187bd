"""Speed paths that must not change results: batches cut to their longest sequence, length-binned
batches, the unpadded (packed) encoder, and the CUDA switches' plain paths on CPU."""

import json
import logging
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from bert.model.config import BertConfig
from bert.model.network import BertForPreTraining, BertForQuestionAnswering, PackedSequences, packed_attention
from bert.pretraining.loader import PAD_TO_MULTIPLE, DynamicMasking, PretrainingData
from bert.training.binning import BIN_WINDOW
from bert.training.optim import build_optimizer, parameter_groups, recipe_optimizer
from tests.support.shard_fixtures import VOCAB, write_shards, write_vocab

torch.set_num_threads(1)
SEQ_LEN = 64


@pytest.fixture(scope="module")
def varied_shards(tmp_path_factory):
    """Rows of real length 6..64 (as phase-2 shards are: many short pairs, some full ones)."""
    directory = tmp_path_factory.mktemp("shards")
    return write_shards(directory, sizes=(150, 90, 130), seq_len=SEQ_LEN, max_pred=3, min_length=6)


def widen(ids: torch.Tensor) -> torch.Tensor:
    return nn.functional.pad(ids, (0, SEQ_LEN - ids.shape[1]))


def rows_of(data) -> list[tuple]:
    return [tuple(row) for batch in data for row in widen(batch["input_ids"]).tolist()]


def waste(data) -> float:
    masks = [batch["attention_mask"] for batch in data]
    return 1 - sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)


# ---------------------------------------------------------------------------------------------
# The loader


@pytest.mark.parametrize("binning", [False, True])
def test_batches_are_cut_to_their_longest_sequence(varied_shards, binning):
    for batch in PretrainingData(
        varied_shards, global_batch_size=8, micro_batch_size=8, seed=1, length_binning=binning
    ):
        width = batch["input_ids"].shape[1]
        longest = int(batch["attention_mask"].sum(1).max())
        assert width % PAD_TO_MULTIPLE == 0 or width == SEQ_LEN
        assert longest <= width < longest + PAD_TO_MULTIPLE
        assert batch["token_type_ids"].shape == batch["attention_mask"].shape == batch["input_ids"].shape
        assert int(batch["masked_lm_positions"].max()) < longest  # the MLM positions stay valid


def test_binning_serves_every_row_once_in_a_seeded_order_with_less_padding(varied_shards):
    plain = PretrainingData(varied_shards, global_batch_size=8, micro_batch_size=8, seed=1)
    binned = PretrainingData(
        varied_shards, global_batch_size=8, micro_batch_size=8, seed=1, length_binning=True
    )
    assert len(binned) == len(plain) == 370 // 8
    assert sorted(rows_of(binned)) == sorted(rows_of(plain))  # the same rows, each once per epoch
    assert rows_of(binned) != rows_of(plain)
    assert rows_of(binned) == rows_of(PretrainingData(varied_shards, 8, 8, seed=1, length_binning=True))
    binned.set_epoch(1)
    assert rows_of(binned) != rows_of(PretrainingData(varied_shards, 8, 8, seed=1, length_binning=True))
    binned.set_epoch(0)
    assert waste(binned) < waste(plain) / 3
    assert 0.3 < waste(plain) < 0.6


def test_binning_keeps_the_rank_split_and_exact_resume(varied_shards):
    whole = PretrainingData(
        varied_shards, global_batch_size=8, micro_batch_size=8, seed=3, length_binning=True, num_workers=2
    )
    halves = [
        PretrainingData(
            varied_shards,
            global_batch_size=8,
            micro_batch_size=4,
            seed=3,
            rank=r,
            world_size=2,
            length_binning=True,
        )
        for r in range(2)
    ]
    batches = list(whole)
    for one, a, b in zip(batches, *halves, strict=True):
        for key in ("input_ids", "attention_mask", "masked_lm_ids", "next_sentence_labels"):
            if one[key].dim() == 1:
                assert torch.equal(one[key], torch.cat([a[key], b[key]]))
            else:
                assert torch.equal(widen(one[key]), torch.cat([widen(a[key]), widen(b[key])]))
    whole.skip_samples(3 * 8)
    assert rows_of(whole) == rows_of(batches[3:])


def test_binning_windows_cover_a_long_epoch(tmp_path):
    shards = write_shards(tmp_path, sizes=(700, 500), seq_len=16, max_pred=2, min_length=6)
    data = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=0, length_binning=True)
    assert len(data) > BIN_WINDOW  # two windows, the second one short
    plain = PretrainingData(shards, global_batch_size=8, micro_batch_size=8, seed=0)
    assert sorted(rows_of(data)) == sorted(rows_of(plain))
    data.skip_samples((BIN_WINDOW + 2) * 8)
    assert (
        rows_of(data)
        == rows_of(PretrainingData(shards, 8, 8, seed=0, length_binning=True))[(BIN_WINDOW + 2) * 8 :]
    )


def test_binning_with_dynamic_masking(tmp_path):
    pytest.importorskip("bert.pretraining.masking")
    shards = write_shards(tmp_path / "s", sizes=(60, 50), seq_len=32, max_pred=3, dynamic=True, min_length=6)
    masking = DynamicMasking.from_vocab(write_vocab(tmp_path / "vocab.txt"), 0.15, 3, whole_word_mask=False)
    data = PretrainingData(
        shards, global_batch_size=8, micro_batch_size=8, seed=5, masking=masking, length_binning=True
    )
    first = list(data)
    assert [b["input_ids"].tolist() for b in first] == [b["input_ids"].tolist() for b in data]
    for batch in first:
        used = batch["masked_lm_positions"] != 0
        assert used.any(1).all() and int(batch["masked_lm_positions"].max()) < batch["input_ids"].shape[1]


# ---------------------------------------------------------------------------------------------
# The unpadded encoder


def config(**overrides) -> BertConfig:
    values = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    return BertConfig(**{**values, **overrides})


def padded_batch(lengths, seq_len=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = (torch.arange(seq_len)[None] < lengths[:, None]).long()
    ids = torch.randint(5, len(VOCAB), (len(lengths), seq_len), generator=g) * mask
    types = (torch.arange(seq_len)[None] > lengths[:, None] // 2).long() * mask
    positions = torch.stack([torch.randperm(int(n) - 1, generator=g)[:3] + 1 for n in lengths]).sort(1).values
    labels = torch.randint(5, len(VOCAB), positions.shape, generator=g)
    nsp = torch.randint(0, 2, (len(lengths),), generator=g)
    return dict(input_ids=ids, token_type_ids=types, attention_mask=mask, masked_lm_positions=positions,
                masked_lm_ids=labels, next_sentence_labels=nsp)  # fmt: skip


LENGTHS = [40, 7, 23, 40, 12, 31]


def test_unpadded_encoder_equals_padded_at_real_tokens():
    torch.manual_seed(0)
    model = BertForPreTraining(config()).eval()
    batch = padded_batch(LENGTHS)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        padded_out = model(**batch)
        padded_seq, padded_pooled = model.bert(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
        model.bert.unpad = True
        packed_out = model(**batch)
        packed_seq, packed_pooled = model.bert(
            batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
        )
    torch.testing.assert_close(packed_seq[real], padded_seq[real], atol=1e-5, rtol=0)
    assert (packed_seq[~real] == 0).all()
    torch.testing.assert_close(packed_pooled, padded_pooled, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_out.mlm_logits, padded_out.mlm_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_out.nsp_logits, padded_out.nsp_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_out.loss, padded_out.loss, atol=1e-5, rtol=0)


def test_unpadded_gradients_equal_padded():
    without_dropout = config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    grads = []
    for unpad in (False, True):
        torch.manual_seed(0)
        model = BertForPreTraining(without_dropout, unpad=unpad).train()
        model(**padded_batch(LENGTHS)).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unpadded_question_answering_and_full_rows():
    torch.manual_seed(0)
    model = BertForQuestionAnswering(config()).eval()
    batch = padded_batch([40, 40, 40])  # no padding at all
    inputs = {key: batch[key] for key in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        padded_out = model(**inputs)
        model.bert.unpad = True
        packed_out = model(**inputs)
    torch.testing.assert_close(packed_out.start_logits, padded_out.start_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed_out.end_logits, padded_out.end_logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("jagged", [False, True])  # True: the CUDA kernel's path (generic code on CPU)
def test_packed_attention_equals_masked_attention(jagged):
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(16)[None] < torch.tensor([16, 3, 9])[:, None]).long()
    packed = PackedSequences.from_mask(mask)
    q, k, v = (torch.randn(3, 16, 2, 8, generator=g) for _ in range(3))  # [N, S, heads, head_size]
    expected = nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2) for x in (q, k, v)), attn_mask=mask.bool()[:, None, None, :]
    ).transpose(1, 2)
    got = packed_attention(*(x.flatten(0, 1)[packed.indices] for x in (q, k, v)), packed, 0.0, jagged)
    torch.testing.assert_close(got, expected.flatten(0, 1)[packed.indices], atol=1e-5, rtol=0)
    assert packed.lengths == [16, 3, 9] and packed.max_seqlen == 16


def test_unpadded_model_loads_with_the_option(tmp_path):
    torch.manual_seed(0)
    BertForPreTraining(config()).save_pretrained(tmp_path)
    model = BertForPreTraining.from_pretrained(tmp_path, unpad=True)
    assert model.bert.unpad is True


# ---------------------------------------------------------------------------------------------
# CUDA switches: their plain paths on CPU


def test_fused_adamw_on_cpu_for_pretraining_only():
    """pretrain@<phase> asks for AdamW's fused kernel on CPU too; fine-tuning keeps torch's loop of
    elementwise ops there (the rounding the demo's fine-tuned models were made with)."""
    model = nn.Linear(4, 2)
    recipe = SimpleNamespace(optimizer="adamw", learning_rate=1e-3, weight_decay=0.01)
    pretraining = recipe_optimizer(model, recipe, use_apex=False, fused_on_cpu=True)
    fine_tuning = recipe_optimizer(model, recipe, use_apex=False)
    assert pretraining.defaults["fused"] and not fine_tuning.defaults["fused"]
    model(torch.randn(3, 4)).sum().backward()
    pretraining.step()
    if torch.cuda.is_available():
        assert recipe_optimizer(model.cuda(), recipe, use_apex=False).defaults["fused"]


def test_apex_requested_without_apex_falls_back(caplog):
    try:
        import apex  # noqa: F401

        pytest.skip("apex is installed")
    except ImportError:
        pass
    model = BertForPreTraining(config(), apex_layer_norm=True)
    assert all(not type(m).__name__.startswith("Fused") for m in model.modules())
    with caplog.at_level(logging.INFO, logger="bert.training.optim"):
        optimizer = build_optimizer(model, "lamb", 1e-3, 0.01, use_apex=True)
    assert (
        type(optimizer).__name__ == "Lamb" and "FusedLAMB is not usable (ModuleNotFoundError" in caplog.text
    )


def test_fused_layer_norms_are_not_weight_decayed():
    class FusedLayerNorm(nn.Module):  # apex's class is no nn.LayerNorm either
        def __init__(self):
            super().__init__()
            self.weight, self.bias = nn.Parameter(torch.ones(4)), nn.Parameter(torch.zeros(4))

    model = nn.Sequential(nn.Linear(4, 4), FusedLayerNorm())
    decay, no_decay = parameter_groups(model, 0.01)
    assert decay["params"] == [model[0].weight]
    assert {id(p) for p in no_decay["params"]} == {id(model[0].bias), id(model[1].weight), id(model[1].bias)}


def test_stage_runs_binned_and_unpadded(tmp_path, monkeypatch):
    """stages.pretrain wires pretrain.length_binning and pretrain.unpad into the loader, the model
    and the metrics."""
    from bert.distributed.launch import setup_distributed
    from stages import pretrain as stage
    from stages.common.params import load_params
    from tests.support.stage_workspace import make_workspace, set_params

    root = make_workspace(tmp_path)
    set_params(root, {"pretrain.log_every": 4, "pretrain.length_binning": True, "pretrain.unpad": True,
                      "pretrain.phase1.max_steps": 4})  # fmt: skip
    monkeypatch.chdir(root)
    params = load_params()
    stage.pretrain(params, "phase1", setup_distributed("gloo", 5))
    metrics = json.loads((root / "metrics/pretrain_phase1.json").read_text())
    assert metrics["steps"] == 4 and 0 <= metrics["padding_waste"] < 0.5
    assert metrics["mfu"] > 0 and metrics["peak_source"] == "probe"
    curves = root / "dvclive/pretrain_phase1/plots/metrics/train"
    for name in ("padding_waste", "tokens_per_second", "model_tflops_per_second", "mfu", "data_wait_share"):
        assert (curves / f"{name}.tsv").read_text().splitlines()[1].startswith("4\t"), name  # bert.throughput


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", [torch.bfloat16, torch.float32])
def test_unpadded_on_cuda_matches_padded(precision):
    """The jagged path (flash / memory-efficient variable-length kernels) against the padded one."""
    torch.manual_seed(0)
    model = BertForPreTraining(config()).cuda().eval()
    batch = {key: value.cuda() for key, value in padded_batch(LENGTHS).items()}
    real = batch["attention_mask"].bool()
    inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    with torch.no_grad(), torch.autocast("cuda", dtype=precision, enabled=precision != torch.float32):
        padded_seq, _ = model.bert(*inputs)
        model.bert.unpad = True
        packed_seq, _ = model.bert(*inputs)
    tolerance = 3e-2 if precision == torch.bfloat16 else 1e-4
    torch.testing.assert_close(packed_seq[real], padded_seq[real], atol=tolerance, rtol=0)
    model.train()  # with attention dropout: trains, gradients finite
    with torch.autocast("cuda", dtype=precision, enabled=precision != torch.float32):
        model(**batch).loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
