import copy
import math

import pytest
import torch
from torch import nn

from bert.training.optim import (
    Lamb,
    build_optimizer,
    decay_start,
    learning_rate_schedule,
    parameter_groups,
    warmup_poly_schedule,
    warmup_stable_decay_schedule,
)
from bert.training.recipe import Recipe


def reference_lamb_step(params, grads, states, lr, weight_decays, max_norm, beta1=0.9, beta2=0.999, eps=1e-6):
    """NVLAMB written out tensor by tensor, float64, straight from the paper and NVIDIA's notes."""
    present = [g for g in grads if g is not None]
    total_norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in present))
    clip = min(1.0, max_norm / (total_norm + 1e-6)) if max_norm is not None else 1.0
    for i, (w, g) in enumerate(zip(params, grads)):
        if g is None:
            continue
        g = g.double() * clip
        state = states[i]
        state["step"] += 1
        state["m"] = beta1 * state["m"] + (1 - beta1) * g
        state["v"] = beta2 * state["v"] + (1 - beta2) * g * g
        m_hat = state["m"] / (1 - beta1 ** state["step"])
        v_hat = state["v"] / (1 - beta2 ** state["step"])
        update = m_hat / (v_hat.sqrt() + eps) + weight_decays[i] * w
        w_norm, u_norm = float(w.norm()), float(update.norm())
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        w -= lr * ratio * update


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("max_norm", [None, 0.5])
def test_lamb_matches_per_parameter_reference(weight_decay, max_norm):
    generator = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (5,), (3, 4, 2), (1,), (6,)]
    ours = [torch.randn(s, generator=generator, dtype=torch.float64) for s in shapes]
    ours[3].zero_()  # a zero weight: trust ratio must fall back to 1
    reference = [p.clone() for p in ours]
    ours = [nn.Parameter(p) for p in ours]
    decays = [weight_decay, 0.0, weight_decay, weight_decay, 0.0]
    optimizer = Lamb(
        [
            {"params": [ours[0], ours[2], ours[3]], "weight_decay": weight_decay},
            {"params": [ours[1], ours[4]], "weight_decay": 0.0},
        ],
        lr=0.01,
    )
    states = [{"step": 0, "m": torch.zeros_like(p), "v": torch.zeros_like(p)} for p in reference]
    for step in range(6):
        grads = [torch.randn(s, generator=generator, dtype=torch.float64) * 3 for s in shapes]
        grads[4] = torch.zeros(shapes[4], dtype=torch.float64)  # a zero grad: zero update, ratio 1
        if step == 2:
            grads[1] = None  # a parameter without a grad this step: untouched, its step count lags
        for p, g in zip(ours, grads):
            p.grad = None if g is None else g.clone()
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_(ours, max_norm)  # what the training loop does
        optimizer.step()
        reference_lamb_step(reference, grads, states, 0.01, decays, max_norm)
    for got, want in zip(ours, reference):
        torch.testing.assert_close(got.detach(), want, atol=1e-6, rtol=1e-6)


def test_lamb_float32_state_dict_round_trip():
    model = nn.Linear(4, 3)
    optimizer = Lamb(parameter_groups(model, 0.01), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    clone = nn.Linear(4, 3)
    clone.load_state_dict(model.state_dict())
    restored = Lamb(parameter_groups(clone, 0.01), lr=0.1)
    restored.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # as torch.load gives it
    for m in (model, clone):
        m.zero_grad()
        m(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    restored.step()
    assert torch.equal(model.weight, clone.weight) and torch.equal(model.bias, clone.bias)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.LayerNorm = nn.LayerNorm(4)
        self.dense = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 10)
        self.decoder.weight = self.embed.weight  # tied, as BERT's MLM decoder


def test_parameter_groups_exclude_bias_and_layernorm():
    model = Tiny()
    decay, no_decay = parameter_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p in decay["params"]) == ["dense.weight", "embed.weight"]
    assert sorted(names[id(p)] for p in no_decay["params"]) == [
        "LayerNorm.bias",
        "LayerNorm.weight",
        "decoder.bias",
        "dense.bias",
    ]
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0


def test_build_optimizer_kinds():
    model = Tiny()
    assert isinstance(build_optimizer(model, "lamb", 1e-3, 0.01, use_apex=True), torch.optim.Optimizer)
    assert isinstance(build_optimizer(model, "adamw", 1e-3, 0.01), torch.optim.AdamW)
    with pytest.raises(ValueError, match="lamb, adamw"):
        build_optimizer(model, "sgd", 1e-3, 0.01)


@pytest.mark.parametrize("power", [1.0, 0.5])
def test_warmup_poly_schedule(power):
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=2.0)
    schedule = warmup_poly_schedule(optimizer, warmup_steps=4, total_steps=12, power=power)
    lrs = []
    for _ in range(12):
        lrs.append(schedule.get_last_lr()[0])
        optimizer.step()
        schedule.step()
    assert lrs[:4] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert lrs[4:] == pytest.approx([2.0 * ((12 - s) / 8) ** power for s in range(4, 12)])
    assert schedule.get_last_lr()[0] == 0.0
    assert all(a >= b for a, b in zip(lrs[3:], lrs[4:]))


def test_schedule_without_warmup_starts_at_peak():
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = warmup_poly_schedule(optimizer, 0, 10, power=1.0)
    assert schedule.get_last_lr()[0] == 1.0


def wsd_rates(warmup: int, decay_start: int, total: int, shape: str, peak: float = 2.0) -> list[float]:
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=peak)
    schedule = warmup_stable_decay_schedule(optimizer, warmup, decay_start, total, shape)
    rates = []
    for _ in range(total):
        rates.append(schedule.get_last_lr()[0])
        optimizer.step()
        schedule.step()
    rates.append(schedule.get_last_lr()[0])  # after the last step
    return rates


@pytest.mark.parametrize(
    "shape, fall",
    [("linear", lambda p: 1 - p), ("cosine", lambda p: 0.5 * (1 + math.cos(math.pi * p))),
     ("1-sqrt", lambda p: 1 - math.sqrt(p))],
)  # fmt: skip
def test_warmup_stable_decay_schedule_boundaries(shape, fall):
    # 12 steps: warm-up 0..3, the peak 4..7, the decay 8..11 (the first decay step still at the peak), 0 after.
    rates = wsd_rates(warmup=4, decay_start=8, total=12, shape=shape)
    assert rates[:4] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert rates[4:9] == pytest.approx([2.0] * 5)
    assert rates[8:12] == pytest.approx([2.0 * fall((s - 8) / 4) for s in range(8, 12)])
    assert rates[12] == 0.0 and all(a > b for a, b in zip(rates[8:12], rates[9:13]))


def test_wsd_recipe_decay_start_and_poly_unchanged():
    base = dict(optimizer="lamb", learning_rate=1.0, warmup_proportion=0.1, decay_power=0.5, weight_decay=0.0,
                grad_clip=1.0, global_batch_size=1, micro_batch_size=1, seed=0, decay_share=0.2,
                decay_shape="1-sqrt")  # fmt: skip
    poly, wsd = Recipe(schedule="poly", **base), Recipe(schedule="wsd", **base)
    assert decay_start(poly, 100) is None and decay_start(wsd, 100) == 80
    assert decay_start(wsd, 3) == 2  # at least one decay step, never into the warm-up
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    factor = learning_rate_schedule(optimizer, wsd, 100).lr_lambdas[0]
    assert [factor(s) for s in (9, 10, 79, 80)] == [1.0, 1.0, 1.0, 1.0] and factor(85) == pytest.approx(0.5)
    # poly is the schedule it always was: NVIDIA's (1 - progress) ** 0.5 after warm-up.
    factor = learning_rate_schedule(optimizer, poly, 100).lr_lambdas[0]
    assert factor(4) == pytest.approx(0.5) and factor(55) == pytest.approx((45 / 90) ** 0.5)
