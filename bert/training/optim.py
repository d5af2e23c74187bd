"""Optimisers and learning-rate schedules for BERT: LAMB (NVIDIA's NVLAMB variant) and AdamW.

Gradient clipping is not done here: the training loop clips the global gradient norm (over every
parameter, after the DDP all-reduce and the fp16 unscale) just before `optimizer.step()`, for every
optimiser alike. That is the one place clipping happens, and it gives the loop the norm to log.
"""

import logging
import math

import torch
from torch import nn

from bert.training.recipe import Recipe

log = logging.getLogger(__name__)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two param groups: weights with `weight_decay`, and biases and LayerNorm parameters without
    (as BERT does). Parameters that do not require grad are left out; tied ones appear once."""
    no_decay_ids = set()
    for module in model.modules():
        # apex's FusedLayerNorm is no nn.LayerNorm subclass: known by its name
        if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("LayerNorm"):
            no_decay_ids.update(id(p) for p in module.parameters(recurse=False))
    decay, no_decay = [], []
    for name, param in model.named_parameters():  # named_parameters() yields a tied tensor once
        if not param.requires_grad:
            continue
        if id(param) in no_decay_ids or name.endswith("bias") or "LayerNorm" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


class Lamb(torch.optim.Optimizer):
    """LAMB as NVIDIA trains BERT with it (NVLAMB): Adam moments with bias correction, the weight
    decay added to the Adam update, and every tensor's step scaled by its trust ratio
    ||w|| / ||update|| (1 when either norm is 0), all tensors included. Clip gradients before
    `step()` (the training loop does). Written with `torch._foreach_*` so each op is one kernel
    launch per group, not one per tensor."""

    def __init__(
        self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.01
    ):
        if lr < 0 or eps < 0 or weight_decay < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(
                f"invalid LAMB hyper-parameters: lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}"
            )
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            grads = [p.grad for p in params]
            for p in params:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
            exp_avgs = [self.state[p]["exp_avg"] for p in params]
            exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
            # Bias correction by each tensor's own step count: a tensor without a grad on some
            # step (an unused embedding row block, a frozen head) has taken fewer steps.
            steps = [self.state[p]["step"] for p in params]

            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)

            # update = m_hat / (sqrt(v_hat) + eps) + weight_decay * w
            bias1 = [1 - beta1**s for s in steps]
            bias2_sqrt = [math.sqrt(1 - beta2**s) for s in steps]
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denom, bias2_sqrt)
            torch._foreach_add_(denom, group["eps"])
            updates = torch._foreach_div(exp_avgs, bias1)
            torch._foreach_div_(updates, denom)
            if group["weight_decay"] != 0:
                torch._foreach_add_(updates, params, alpha=group["weight_decay"])

            weight_norms = torch._foreach_norm(params)
            update_norms = torch._foreach_norm(updates)
            ratios = [
                torch.where((w > 0) & (u > 0), w / u, torch.ones_like(w))
                for w, u in zip(weight_norms, update_norms)
            ]
            # w -= lr * ratio * update, with the ratio kept on the device (no host sync per tensor)
            torch._foreach_mul_(updates, ratios)
            torch._foreach_add_(params, updates, alpha=-group["lr"])
        return loss


def recipe_optimizer(
    model: nn.Module, recipe: Recipe, use_apex: bool, fused_on_cpu: bool = False
) -> torch.optim.Optimizer:
    """The recipe's optimizer over `model`. AdamW takes torch's fused kernel on CUDA, and on CPU
    where `fused_on_cpu`: pretraining asks for it (one pass over each tensor instead of torch's
    default loop of elementwise ops, 5x faster over ModernBERT-base's 150M parameters, where that
    loop was a third of a CPU step); fine-tuning keeps the loop on CPU, whose rounding the default
    demo's fine-tuned models were made with."""
    fused = next(model.parameters()).is_cuda or fused_on_cpu
    return build_optimizer(
        model, recipe.optimizer, recipe.learning_rate, recipe.weight_decay, use_apex, fused
    )


def build_optimizer(
    model: nn.Module,
    name: str,
    learning_rate: float,
    weight_decay: float,
    use_apex: bool = False,
    fused: bool = False,
) -> torch.optim.Optimizer:
    """`lamb` or `adamw` over `parameter_groups(model, weight_decay)`. `use_apex` swaps in apex's
    FusedLAMB (same NVLAMB maths, CUDA only) when `import apex` works; otherwise ours, with a log
    line. `fused` asks torch's AdamW for its fused kernel on the model's device (CUDA or CPU)."""
    groups = parameter_groups(model, weight_decay)
    if name == "lamb":
        if use_apex:
            try:
                from apex.optimizers import FusedLAMB

                # The loop clips, so FusedLAMB's own clipping is switched off (infinite max norm).
                return FusedLAMB(
                    groups, lr=learning_rate, eps=1e-6, max_grad_norm=float("inf"), use_nvlamb=True
                )
            except Exception as error:  # not importable, or built without its CUDA extensions
                log.info("pretrain.use_apex is on but apex's FusedLAMB is not usable (%s: %s); using bert.training.optim.Lamb",
                         type(error).__name__, error)  # fmt: skip
        return Lamb(groups, lr=learning_rate, eps=1e-6)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=learning_rate, eps=1e-6, fused=fused)
    raise ValueError(f"unknown optimizer {name!r}; allowed: lamb, adamw")


def fit_optimizer_state(state: dict, optimizer: torch.optim.Optimizer) -> dict:
    """`state` (an optimizer's state_dict) in the layout `optimizer` loads, for a run resumed across
    `use_apex`: apex's FusedLAMB counts steps in each param group (group["step"]), our Lamb per
    parameter (state[i]["step"]). The step count moves between the two (bias correction goes on
    where it was), and settings one optimizer has and the other lacks (FusedLAMB's
    bias_correction, max_grad_norm, ...) come from `optimizer`'s own groups. Other layouts
    (AdamW, or already fitting) are returned as they are."""
    target_is_fused = type(optimizer).__name__ == "FusedLAMB"
    if type(optimizer).__name__ not in ("FusedLAMB", "Lamb") or not state["param_groups"]:
        return state
    groups = [dict(group) for group in state["param_groups"]]
    per_param = {index: dict(values) for index, values in state["state"].items()}
    stored_in_groups = any("step" in group for group in groups)
    stored_per_param = any("step" in values for values in per_param.values())
    for group, own in zip(groups, optimizer.param_groups):
        for key, value in own.items():
            if key not in ("params", "step"):
                group.setdefault(key, value)
        if target_is_fused and stored_per_param:
            steps = [per_param[i].pop("step") for i in group["params"] if "step" in per_param.get(i, {})]
            group["step"] = int(max(steps, default=0))  # FusedLAMB: one count for the group
        elif not target_is_fused and stored_in_groups:
            step = int(group.pop("step", 0))
            for index in group["params"]:
                if index in per_param:
                    per_param[index]["step"] = step
    return {"state": per_param, "param_groups": groups}


def warmup_poly_schedule(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, power: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over `warmup_steps` (the first step already uses lr/warmup_steps, not 0), then
    polynomial decay to 0 at `total_steps`: factor ((total - step) / (total - warmup)) ** power.
    power 1 is BERT's linear decay; NVIDIA's phase 1/2 use 0.5."""
    if total_steps < 1 or not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps ({warmup_steps}) <= total_steps ({total_steps}) and total_steps >= 1"
        )

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps)) ** power

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# How a warmup-stable-decay schedule falls from the peak (1) to 0 as the decay's progress p goes
# from 0 to 1. 1-sqrt is the one to choose by default: in Hägele et al. 2024 ("Scaling Laws and
# Compute-Optimal Training Beyond Fixed Training Durations") a 1-sqrt cool-down matched or beat
# cosine over the whole run and beat linear, and it is ModernBERT's; linear and cosine are there
# to compare against.
DECAY_SHAPES = {
    "linear": lambda p: 1.0 - p,
    "cosine": lambda p: 0.5 * (1.0 + math.cos(math.pi * p)),
    "1-sqrt": lambda p: 1.0 - math.sqrt(p),
}


def warmup_stable_decay_schedule(
    optimizer: torch.optim.Optimizer, warmup_steps: int, decay_start: int, total_steps: int, shape: str
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over `warmup_steps` (as `warmup_poly_schedule`), the peak rate until step
    `decay_start`, then a decay to 0 at `total_steps` of `shape` (DECAY_SHAPES): factor
    shape((step - decay_start) / (total - decay_start)), so the first decay step still runs at
    the peak and the last one just above 0, as in the polynomial schedule. The checkpoint after
    `decay_start` steps is the last one the decay has not touched (bert.training.loop keeps it)."""
    if total_steps < 1 or not 0 <= warmup_steps <= decay_start <= total_steps:
        raise ValueError(
            f"need 0 <= warmup_steps ({warmup_steps}) <= decay_start ({decay_start}) <= total_steps "
            f"({total_steps}) and total_steps >= 1"
        )
    fall = DECAY_SHAPES[shape]

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if step < decay_start:
            return 1.0
        return max(0.0, fall(min(1.0, (step - decay_start) / max(1, total_steps - decay_start))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def decay_start(recipe: Recipe, max_steps: int) -> int | None:
    """The step at which a wsd recipe's decay begins over a run of `max_steps` (the last
    `decay_share` of the steps, at least one, never into the warm-up); None for poly, whose decay
    is the whole run after warm-up."""
    if recipe.schedule != "wsd":
        return None
    warmup_steps = round(recipe.warmup_proportion * max_steps)
    decay_steps = max(1, round(recipe.decay_share * max_steps))
    return max(warmup_steps, max_steps - decay_steps)


def learning_rate_schedule(
    optimizer: torch.optim.Optimizer, recipe: Recipe, max_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """The recipe's schedule over a run of `max_steps` optimizer steps: linear warm-up over
    `warmup_proportion` of them, then (poly) polynomial decay to 0 with `decay_power`, or (wsd)
    the peak until `decay_start`, then `decay_shape` down to 0."""
    warmup_steps = round(recipe.warmup_proportion * max_steps)
    if recipe.schedule == "wsd":
        start = decay_start(recipe, max_steps)
        return warmup_stable_decay_schedule(optimizer, warmup_steps, start, max_steps, recipe.decay_shape)
    return warmup_poly_schedule(optimizer, warmup_steps, max_steps, recipe.decay_power)
