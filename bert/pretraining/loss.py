"""The pretraining objective `bert.training.loop.train` minimises in the pretraining stages: MLM loss,
a mean over every masked token of the global batch, plus NSP loss, a mean over its sequences
(when the batches have next-sentence labels: not from MLM-only shards)."""

import torch
from torch import nn

from bert.model.flops import pretraining_flops, real_lengths
from bert.training.loop import Objective


def pretraining_loss(model: nn.Module, batch: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """BertForPreTraining's MLM and NSP losses (each a mean over the batch's items, see
    `items_per_term`) and the stats the pretraining logs show."""
    out = model(**batch)
    next_sentence = "next_sentence_labels" in batch
    with torch.no_grad():
        mlm_correct = (out.mlm_logits.argmax(-1) == out.mlm_labels).sum()
        if next_sentence:
            nsp_correct = (out.nsp_logits.argmax(-1) == batch["next_sentence_labels"].view(-1)).sum()
    # The share of padding (padding_waste) is the training loop's, for every objective (bert.training.throughput).
    stats = {
        "mlm_accuracy": (mlm_correct, out.mlm_labels.numel()),
        **({"nsp_accuracy": (nsp_correct, out.nsp_logits.shape[0])} if next_sentence else {}),
    }
    terms = {"mlm_loss": out.mlm_loss}
    if next_sentence:
        terms["nsp_loss"] = out.nsp_loss
    return terms, stats


def items_per_term(batch: dict) -> dict[str, torch.Tensor | int]:
    """What each loss term averages over, counted from the batch before the forward pass: the
    masked tokens (a used slot has a position other than 0, as BertForPreTraining reads them) and
    the sequences."""
    items = {"mlm_loss": (batch["masked_lm_positions"] != 0).sum()}
    if "next_sentence_labels" in batch:
        items["nsp_loss"] = len(batch["next_sentence_labels"])
    return items


def step_flops(model: nn.Module, batch: dict) -> float:
    """Model FLOPs of a training step on the batch's real tokens and its masked ones (bert.model.flops)."""
    masked = (batch["masked_lm_positions"].numpy() != 0).sum(1)
    return pretraining_flops(model.config, real_lengths(batch["attention_mask"]), masked)


pretraining_objective = Objective(pretraining_loss, items_per_term, step_flops)
