"""SQuAD fine-tuning glue between `bert.squad.features` (the windows) and `bert.training` (the loop).

- `QuestionAnsweringBatches`: the windows of `SquadFeatures` as shuffled micro-batches of tensors,
  one rank's share of each global batch, reshuffled every epoch from (seed, epoch), resumable at a
  sample position; each batch is cut to its longest sequence (padding beyond it does nothing but
  cost time), and with `length_binning` made of windows of similar length (bert.binning, as the
  pretraining loader does): SQuAD's windows fill about half of 384 tokens, but a
  random batch of 32 almost always holds one full window, so cutting alone saves little.
- `question_answering_loss`: the loss function `bert.training.train` calls.
"""

import logging
import math

import numpy as np
import torch
from torch import nn

from bert.binning import BIN_WINDOW, bin_by_length
from bert.squad.features import SquadFeatures, trimmed_length

log = logging.getLogger(__name__)

TRAINING_ARRAYS = ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions")


class QuestionAnsweringBatches:
    """Micro-batches of SQuAD training windows for `bert.training.train`.

    Epoch e visits every window once in the order of a permutation drawn from (seed, e); global
    batch j is windows [j*B*W, (j+1)*B*W) of it, of which rank r takes the r-th slice of B. The
    last incomplete global batch is dropped, so every rank takes the same number of steps.
    With `length_binning`, each window of BIN_WINDOW global batches of that order is sorted by
    length, cut into global batches again, and those are served in an order shuffled from
    (seed, e, window): the batches still depend only on the seed and the global batch size."""

    def __init__(
        self,
        features: SquadFeatures,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        length_binning: bool = False,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.arrays = {name: getattr(features, name) for name in TRAINING_ARRAYS}
        self.lengths = features.attention_mask.sum(axis=1)
        self.length_binning = length_binning
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.epoch, self.start_batch = 0, 0
        self.batches_per_epoch = len(features) // (batch_size * world_size)
        if self.batches_per_epoch == 0:
            raise ValueError(
                f"{len(features)} training windows make no global batch of {batch_size} x {world_size} ranks"
            )

    def __len__(self) -> int:
        return self.batches_per_epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.start_batch = epoch, 0

    def skip_samples(self, samples: int) -> None:
        """Start the current epoch after `samples` windows (counted over all ranks)."""
        self.start_batch = samples // (self.batch_size * self.world_size)

    def epoch_order(self) -> np.ndarray:
        """This epoch's windows, global batch after global batch (the incomplete last one dropped)."""
        global_batch = self.batch_size * self.world_size
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.lengths))
        order = order[: self.batches_per_epoch * global_batch]
        if not self.length_binning:
            return order
        binned = []
        for window, first in enumerate(range(0, len(order), BIN_WINDOW * global_batch)):
            rows = order[first : first + BIN_WINDOW * global_batch]
            by_length, batch_order = bin_by_length(
                self.lengths[rows], len(rows) // global_batch, self.seed, self.epoch, window
            )
            binned.append(rows[by_length].reshape(-1, global_batch)[batch_order].ravel())
        return np.concatenate(binned)

    def __iter__(self):
        order = self.epoch_order()
        global_batch = self.batch_size * self.world_size
        for j in range(self.start_batch, self.batches_per_epoch):
            first = j * global_batch + self.rank * self.batch_size
            rows = np.sort(order[first : first + self.batch_size])  # sorted rows: faster gathers
            batch = {name: array[rows] for name, array in self.arrays.items()}
            length = trimmed_length(batch["attention_mask"])
            yield {
                name: torch.from_numpy(array[:, :length] if array.ndim == 2 else array).long()
                for name, array in batch.items()
            }
        self.start_batch = 0


def steps_for_epochs(
    num_windows: int, epochs: float, batch_size: int, grad_accum_steps: int, world_size: int
) -> int:
    """Optimizer steps that cover `epochs` passes over the training windows (at least 1)."""
    micro_batches_per_epoch = num_windows // (batch_size * world_size)
    return max(1, math.ceil(epochs * micro_batches_per_epoch / grad_accum_steps))


def question_answering_loss(model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
    """The mean of the start and end cross-entropies, how often the model already picks the
    exact gold span (start and end both right), and the share of token slots that held padding."""
    out = model(**batch)
    with torch.no_grad():
        exact = (out.start_logits.argmax(-1) == batch["start_positions"]) & (
            out.end_logits.argmax(-1) == batch["end_positions"]
        )
        mask = batch["attention_mask"]
    stats = {
        "span_accuracy": (exact.sum(), exact.numel()),
        "padding_waste": (mask.numel() - mask.sum(), mask.numel()),
    }
    return out.loss, stats
