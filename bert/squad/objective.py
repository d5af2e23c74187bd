"""What SQuAD fine-tuning minimises (stage finetune_squad): `question_answering_objective`, the
span loss, a mean over the windows of the whole global batch, with the exact-span accuracy it
logs; finetune_squad trains it (bert.training.run)."""

import torch
from torch import nn

from bert.model.flops import question_answering_flops, real_lengths
from bert.training.loop import Objective


def question_answering_loss(model: nn.Module, batch: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """The loss term "loss", the mean over the batch's windows of the mean of their start and end
    cross-entropies; how often the model already picks the exact gold span (start and end both
    right). (The share of padding is the training loop's, bert.training.throughput.)"""
    out = model(**batch)
    with torch.no_grad():
        exact = (out.start_logits.argmax(-1) == batch["start_positions"]) & (
            out.end_logits.argmax(-1) == batch["end_positions"]
        )
    return {"loss": out.loss}, {"span_accuracy": (exact.sum(), exact.numel())}


def windows_per_term(batch: dict) -> dict[str, int]:
    """What the span loss averages over: the batch's windows (every training window holds its
    answer's positions, or 0 for [CLS], so none is left out)."""
    return {"loss": len(batch["start_positions"])}


def question_answering_step_flops(model: nn.Module, batch: dict) -> float:
    """Model FLOPs of a training step on the batch's real tokens (bert.model.flops)."""
    return question_answering_flops(model.config, real_lengths(batch["attention_mask"]))


question_answering_objective = Objective(
    question_answering_loss, windows_per_term, question_answering_step_flops
)
