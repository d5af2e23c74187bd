import copy
import math

import pytest
import torch
from torch import nn

from bert.training.optim import Lamb, build_optimizer, parameter_groups, warmup_poly_schedule


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
