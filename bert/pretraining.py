"""The pretraining objective: the loss function `bert.training.train` calls in the pretraining stages."""

import torch
from torch import nn


def pretraining_loss(model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
    """BertForPreTraining's MLM + NSP loss and the stats the pretraining logs show."""
    out = model(**batch)
    with torch.no_grad():
        mlm_correct = (out.mlm_logits.argmax(-1) == out.mlm_labels).sum()
        nsp_correct = (out.nsp_logits.argmax(-1) == batch["next_sentence_labels"].view(-1)).sum()
        mask = batch["attention_mask"]
        padded_slots = mask.numel() - mask.sum()
    stats = {
        "mlm_loss": (out.mlm_loss, 1),
        "nsp_loss": (out.nsp_loss, 1),
        "mlm_accuracy": (mlm_correct, out.mlm_labels.numel()),
        "nsp_accuracy": (nsp_correct, out.nsp_logits.shape[0]),
        # share of the token slots the model ran that held padding (see pretraining_loader)
        "padding_waste": (padded_slots, mask.numel()),
    }
    return out.loss, stats
