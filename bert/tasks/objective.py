"""What SWAG and GLUE fine-tuning minimise (stage finetune_task): `task_objective`, the head's
loss, a mean over the examples, with the accuracy it logs; finetune_task trains it (bert.training.run)."""

import torch
from torch import nn

from bert.model.flops import classification_flops, real_lengths
from bert.training.loop import per_row


def task_loss(model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
    """The head's loss (cross-entropy over classes or choices, squared error of a score), a mean
    over the batch's examples; for classes and choices, how often the model already picks the
    right one."""
    out = model(**batch)
    stats = {}
    if out.logits.shape[-1] > 1 and not batch["labels"].is_floating_point():
        with torch.no_grad():
            right = out.logits.argmax(-1) == batch["labels"]
        stats["accuracy"] = (right.sum(), right.numel())
    return out.loss, stats


def task_step_flops(model: nn.Module, batch: dict) -> float:
    """Model FLOPs of a training step on the batch's real tokens (bert.model.flops): a classifier's
    labels, or one score per candidate of a multiple choice (its batch is [N, choices, S])."""
    lengths = real_lengths(batch["attention_mask"])
    return classification_flops(model.config, lengths, getattr(model, "num_labels", 1))


task_objective = per_row(task_loss, task_step_flops)
