"""bert.model.flops: the model FLOP count against a hand count and against torch's FlopCounterMode on our
models, and the measured matmul peak.

What is counted, here as in bert/model/flops.py: matmuls only (torch's FlopCounterMode counts mm,
addmm, bmm and the fused attention kernels, 2 FLOPs per multiply-add, forward and backward);
elementwise work (LayerNorm, softmax, GELU, dropout, embeddings, losses) is excluded by both.
"""

import numpy as np
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bert.model.config import WORDPIECE_SPECIAL_TOKEN_IDS, BertConfig, ModernBertConfig
from bert.model.flops import (
    band_pairs,
    classification_flops,
    encoder_flops,
    matmul_peak,
    matmul_shapes,
    mfu,
    pretraining_flops,
    question_answering_flops,
    token_counts,
)
from bert.model.modernbert import (
    ModernBertForMaskedLM,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
)
from bert.model.network import BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification

torch.set_num_threads(2)

# No dropout: the counts do not depend on it, and the step is then the same every time.
SMALL = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                   max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip


def test_hand_count_of_a_tiny_pretraining_step():
    # H=4, I=8, 2 layers of 2 heads (head size 2), vocabulary 10; one sequence of 3 tokens, 1 masked.
    config = BertConfig(
        vocab_size=10, hidden_size=4, num_hidden_layers=2, num_attention_heads=2, intermediate_size=8
    )
    matmuls = [  # (rows, inner, columns) of every multiply in the forward
        # layer 1, all 3 rows: QKV, scores and weighted sum per head, output, feed-forward in and out
        (3, 4, 12), (3, 2, 3), (3, 2, 3), (3, 3, 2), (3, 3, 2), (3, 4, 4), (3, 4, 8), (3, 8, 4),
        # layer 2, keys and values of all 3 rows, the rest for [CLS] and the masked token only
        (3, 4, 8), (2, 4, 4), (2, 2, 3), (2, 2, 3), (2, 3, 2), (2, 3, 2), (2, 4, 4), (2, 4, 8), (2, 8, 4),
        # pooler and NSP on [CLS]; MLM transform and vocabulary projection on the masked token
        (1, 4, 4), (1, 4, 2), (1, 4, 4), (1, 4, 10),
    ]  # fmt: skip
    forward = 2 * sum(m * k * n for m, k, n in matmuls)
    assert forward == 1744
    assert pretraining_flops(config, 3, 1, training=False) == forward
    assert pretraining_flops(config, 3, 1) == 3 * forward  # backward: two matmuls per forward one
    # A batch is the sum of its sequences; padding counted as tokens costs more than real tokens.
    two = pretraining_flops(config, [3, 2], [1, 1])
    assert two == pretraining_flops(config, 3, 1) + pretraining_flops(config, 2, 1)
    assert pretraining_flops(config, [3, 3], 1) > two


def test_base_step_is_6_params_tokens_plus_attention_less_the_skipped_rows():
    config = BertConfig.preset("base", vocab_size=30522)
    h, i, s, layers = config.hidden_size, config.intermediate_size, 128, config.num_hidden_layers
    layer_params = 4 * h * h + 2 * h * i
    # Every layer on every token, less what the last one skips: all but keys and values (2H²) and
    # attention, for the tokens the heads never read (all of them here, but [CLS]).
    full_encoder = 6 * layers * layer_params * s + 12 * layers * s * s * h
    skipped = 6 * (s - 1) * ((layer_params - 2 * h * h) + 2 * s * h)
    assert pretraining_flops(config, s, 0) == pytest.approx(full_encoder - skipped + 6 * (h * h + 2 * h))
    # Each masked token adds its last-layer row and the MLM head (transform + vocabulary matmul).
    added = pretraining_flops(config, s, 20) - pretraining_flops(config, s, 0)
    per_masked = 6 * ((layer_params - 2 * h * h) + 2 * s * h + h * h + h * config.vocab_size)
    assert added == pytest.approx(20 * per_masked)
    # The encoder alone, every row: 2 x (params x tokens + attention) per forward.
    assert encoder_flops(config, s) == 2 * layers * (layer_params * s + 2 * s * s * h)


def counted(model: torch.nn.Module, inputs: dict) -> int:
    """FlopCounterMode's count of one forward + backward. SDPA runs its math path (explicit bmm
    for scores and weighted sum) because the counter does not know the CPU flash kernel."""
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(**inputs).loss.backward()
    return counter.get_total_flops()


def batch(lengths: list[int], seq_len: int = 16, slots: int = 3) -> dict:
    """A padded batch; every masked slot used (the last layer computes a row per slot)."""
    g = torch.Generator().manual_seed(0)
    mask = (torch.arange(seq_len)[None] < torch.tensor(lengths)[:, None]).long()
    positions = torch.stack([torch.randperm(n - 1, generator=g)[:slots] + 1 for n in lengths]).sort(1).values
    return dict(
        input_ids=torch.randint(5, SMALL.vocab_size, mask.shape, generator=g) * mask,
        token_type_ids=torch.zeros_like(mask),
        attention_mask=mask,
        masked_lm_positions=positions,
        masked_lm_ids=torch.randint(5, SMALL.vocab_size, positions.shape, generator=g),
        next_sentence_labels=torch.tensor([0, 1, 0][: len(lengths)]),
    )


LENGTHS = [16, 9, 5]


def test_pretraining_count_equals_flop_counter_on_a_padded_batch():
    torch.manual_seed(0)
    inputs = batch(LENGTHS)
    lengths = token_counts(inputs["attention_mask"], padded=True)
    assert lengths == [16, 16, 16]
    assert counted(BertForPreTraining(SMALL).train(), inputs) == pretraining_flops(SMALL, lengths, 3)


def test_question_answering_count_equals_flop_counter_padded_and_unpadded():
    torch.manual_seed(0)
    inputs = batch(LENGTHS)
    inputs = {k: inputs[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    inputs |= dict(start_positions=torch.tensor([1, 2, 3]), end_positions=torch.tensor([2, 3, 4]))
    padded = token_counts(inputs["attention_mask"], padded=True)
    assert counted(BertForQuestionAnswering(SMALL).train(), inputs) == question_answering_flops(SMALL, padded)
    # Unpadded, the encoder runs on the 30 real tokens, attention within each sequence; the start /
    # end projection still runs on the scattered-back [N, S, H] (3 x 2H per padding position).
    real = token_counts(inputs["attention_mask"], padded=False)
    assert real == LENGTHS
    padding = 3 * 16 - sum(real)
    unpadded_model = BertForQuestionAnswering(SMALL, unpad=True).train()
    assert counted(unpadded_model, inputs) == question_answering_flops(SMALL, real) + 3 * padding * 2 * 2 * 32
    assert question_answering_flops(SMALL, real) < question_answering_flops(SMALL, padded)


def test_classification_count_equals_flop_counter():
    torch.manual_seed(0)
    inputs = batch(LENGTHS)
    inputs = {k: inputs[k] for k in ("input_ids", "token_type_ids", "attention_mask")} | {
        "labels": torch.tensor([0, 2, 1])
    }
    model = BertForSequenceClassification(SMALL, num_labels=3).train()
    assert counted(model, inputs) == classification_flops(SMALL, [16] * 3, num_labels=3)


def test_matmul_peak_is_the_best_of_the_model_shapes():
    config = BertConfig(
        vocab_size=10, hidden_size=64, num_hidden_layers=1, num_attention_heads=1, intermediate_size=256
    )
    assert matmul_shapes(config, 32)[:3] == [(32, 64, 64), (32, 64, 256), (32, 256, 64)]
    peak = matmul_peak(config, 32, "cpu", "fp32", min_seconds=0.002)
    assert len(peak.rates) == 9 and peak.tflops == max(peak.rates.values()) > 0
    assert peak.rates["x".join(map(str, peak.shape))] == peak.tflops
    assert peak.to_dict()["precision"] == "fp32"
    assert mfu(2e12, 2.0, 4.0) == 0.25 and mfu(1.0, 1.0, None) is None


def test_hand_count_of_a_tiny_modernbert_step():
    # H=4, I=6 (GeGLU in: 12), 2 heads of 2; layer 0 global, layer 1 local with window 2 (a token sees
    # its neighbours); vocabulary 10; one sequence of 4 tokens, 1 masked.
    config = ModernBertConfig(vocab_size=10, hidden_size=4, intermediate_size=6, num_hidden_layers=2,
                              num_attention_heads=2, global_attn_every_n_layers=2, local_attention=2,
                              **WORDPIECE_SPECIAL_TOKEN_IDS)  # fmt: skip
    projections = [(4, 4, 12), (4, 4, 4), (4, 4, 12), (4, 6, 4)]  # QKV, output, GeGLU in, out: every layer
    # attention per head: 16 (query, key) pairs in the global layer, 4 + 2 x 3 = 10 in the band
    global_attention = 2 * (2 * 16 * 2)  # 2 heads x (scores + weighted sum) x pairs x head size
    local_attention = 2 * (2 * 10 * 2)
    head = [(1, 4, 4), (1, 4, 10)]  # the prediction head's dense, the vocabulary, on the masked token
    forward = 2 * (2 * sum(m * k * n for m, k, n in projections) + global_attention + local_attention)
    forward += 2 * sum(m * k * n for m, k, n in head)
    assert forward == 2 * (2 * 544 + 128 + 80) + 2 * 56 == 2704
    assert pretraining_flops(config, 4, 1, training=False) == forward
    assert pretraining_flops(config, 4, 1) == 3 * forward


def test_modernbert_count_equals_flop_counter_where_the_window_holds_the_sequence():
    """FlopCounterMode counts what the kernels compute: a masked dense attention over the whole
    sequence. Where the window covers it, that is also the model's count."""
    config = ModernBertConfig(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                              num_attention_heads=4, local_attention=32, **WORDPIECE_SPECIAL_TOKEN_IDS)  # fmt: skip
    torch.manual_seed(0)
    inputs = batch(LENGTHS)
    inputs.pop("token_type_ids")
    inputs.pop("next_sentence_labels", None)
    lengths = token_counts(inputs["attention_mask"], padded=True)
    model = ModernBertForMaskedLM(config).train()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(token_type_ids=None, **inputs).loss.backward()
    assert counter.get_total_flops() == pretraining_flops(config, lengths, 3)
    # classifiers and QA: every layer on every token, the prediction head, the classifier
    qa = ModernBertForQuestionAnswering(config).train()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        qa(
            inputs["input_ids"],
            None,
            inputs["attention_mask"],
            torch.tensor([1, 2, 3]),
            torch.tensor([2, 3, 4]),
        ).loss.backward()
    assert counter.get_total_flops() == question_answering_flops(config, lengths)
    classifier = ModernBertForSequenceClassification(config, num_labels=3).train()
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        classifier(
            inputs["input_ids"], None, inputs["attention_mask"], torch.tensor([0, 2, 1])
        ).loss.backward()
    assert counter.get_total_flops() == classification_flops(config, lengths, 3)


def test_local_layers_count_their_window_not_the_sequence():
    config = ModernBertConfig.preset("modernbert-base", 50368)
    all_global = ModernBertConfig.preset("modernbert-base", 50368)
    all_global.layer_types = ["full_attention"] * config.num_hidden_layers
    s, h, local_layers = 1024, config.hidden_size, config.layer_types.count("sliding_attention")
    assert local_layers == 14  # of 22: every third layer (0, 3, ..., 21) is global
    # a local query sees 64 tokens each side (129 keys), less at the ends of the sequence
    assert band_pairs(np.array([s]), 64)[0] == 129 * s - 64 * 65
    per_local_layer = 2 * 2 * h * (s * s - (129 * s - 64 * 65))  # scores and weighted sum, x 2 FLOPs
    assert encoder_flops(all_global, s) - encoder_flops(config, s) == local_layers * per_local_layer
