"""A SWAG or GLUE model over a split: its logits, and the predicted labels or scores."""

import numpy as np
import torch
from torch import nn

from bert.tasks.catalogue import Task
from bert.tasks.features import TaskFeatures
from bert.training.inference import batched_outputs


def predict_logits(
    model: nn.Module,
    features: TaskFeatures,
    *,
    batch_size: int,
    device: torch.device | str,
    precision: str,
    progress: bool = True,
) -> np.ndarray:
    """Logits (float32) [N, classes], [N, choices], or [N, 1] for a score, in the features' order."""
    logits = None
    for rows, _, out in batched_outputs(
        model, features.model_inputs(), batch_size, device, precision, progress
    ):
        batch = out.logits.float().cpu().numpy()
        if logits is None:
            logits = np.zeros((len(features), batch.shape[-1]), np.float32)
        logits[rows] = batch
    return logits


def predicted_labels(task: Task, logits: np.ndarray) -> np.ndarray:
    """Class or choice indices (int64), or scores (float32) for a regression task."""
    return logits[:, 0].astype(np.float32) if task.kind == "regression" else logits.argmax(-1)
