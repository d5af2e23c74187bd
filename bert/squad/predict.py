"""A question-answering model over SQuAD windows: start and end logits of every window (stage
predict_squad, `python -m bert.squad.ask`, the benchmark), through bert.training.inference's loop."""

import numpy as np
import torch
from torch import nn

from bert.squad.features import SquadFeatures
from bert.training.inference import batched_outputs


def predict_logits(
    model: nn.Module,
    features: SquadFeatures,
    *,
    batch_size: int,
    device: torch.device | str,
    precision: str,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits [F, S] (float32) of every window, in the features' order. The windows
    run longest first in batches of similar length, each batch cut to its longest window, so the
    model spends (almost) no time on padding; the positions past a window's batch length get -inf."""
    num_features, seq_len = features.input_ids.shape
    start_logits = np.full((num_features, seq_len), -np.inf, dtype=np.float32)
    end_logits = np.full((num_features, seq_len), -np.inf, dtype=np.float32)
    inputs = {name: getattr(features, name) for name in ("input_ids", "token_type_ids", "attention_mask")}
    for rows, length, out in batched_outputs(model, inputs, batch_size, device, precision, progress):
        start_logits[rows, :length] = out.start_logits.float().cpu().numpy()
        end_logits[rows, :length] = out.end_logits.float().cpu().numpy()
    return start_logits, end_logits
