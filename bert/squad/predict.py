"""A question-answering model over SQuAD windows: start and end logits of every window, the one
inference loop of the project (stage predict_squad, `python -m bert.squad.ask`, the benchmark)."""

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from bert.precision import AUTOCAST_DTYPES
from bert.squad.features import SquadFeatures, trimmed_length


def predict_logits(
    model: nn.Module,
    features: SquadFeatures,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end logits [F, S] (float32) of every window, in the features' order. The windows
    run longest first in batches of similar length, each batch cut to its longest window, so the
    model spends (almost) no time on padding; the positions past a window's batch length get -inf."""
    device = torch.device(device)
    amp_dtype = AUTOCAST_DTYPES[precision]
    num_features, seq_len = features.input_ids.shape
    start_logits = np.full((num_features, seq_len), -np.inf, dtype=np.float32)
    end_logits = np.full((num_features, seq_len), -np.inf, dtype=np.float32)
    longest_first = np.argsort(-features.attention_mask.sum(1), kind="stable")
    model.eval()
    batches = range(0, num_features, batch_size)
    with torch.inference_mode():
        for first in tqdm(batches, desc="predict", unit="batch", disable=not progress):
            rows = np.sort(longest_first[first : first + batch_size])  # sorted rows: faster gathers
            length = trimmed_length(features.attention_mask[rows])
            inputs = {
                name: torch.from_numpy(getattr(features, name)[rows, :length]).long().to(device)
                for name in ("input_ids", "token_type_ids", "attention_mask")
            }
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                out = model(**inputs)
            start_logits[rows, :length] = out.start_logits.float().cpu().numpy()
            end_logits[rows, :length] = out.end_logits.float().cpu().numpy()
    return start_logits, end_logits
