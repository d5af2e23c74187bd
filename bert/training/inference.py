"""A model over a whole set of inputs, the one inference loop of the project (SQuAD windows in
bert.squad.predict, SWAG and GLUE examples in bert.tasks.predict): longest sequences first, in
batches of similar length, each cut to its longest sequence, so (almost) no time goes on padding."""

from collections.abc import Iterator, Mapping

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from bert.model.precision import AUTOCAST_DTYPES
from bert.training.binning import sequence_lengths, trimmed_length


def batched_outputs(
    model: nn.Module,
    inputs: Mapping[str, np.ndarray],
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    precision: str = "fp32",
    progress: bool = True,
) -> Iterator[tuple[np.ndarray, int, object]]:
    """(rows, length, the model's output) per batch. `inputs` are the model's keyword arguments,
    arrays whose first axis is the example and last the token (input_ids, token_type_ids,
    attention_mask; [N, S], or [N, C, S] for C choices); `rows` are the batch's examples (sorted)
    and `length` the width it was cut to."""
    device = torch.device(device)
    amp_dtype = AUTOCAST_DTYPES[precision]
    mask = inputs["attention_mask"]
    longest_first = np.argsort(-sequence_lengths(mask), kind="stable")
    model.eval()
    batches = range(0, len(mask), batch_size)
    with torch.inference_mode():
        for first in tqdm(batches, desc="predict", unit="batch", disable=not progress):
            rows = np.sort(longest_first[first : first + batch_size])  # sorted rows: faster gathers
            length = trimmed_length(mask[rows])
            batch = {
                name: torch.from_numpy(array[rows][..., :length]).long().to(device)
                for name, array in inputs.items()
            }
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                yield rows, length, model(**batch)
