"""SQuAD fine-tuning glue between `bert.squad.features` (the windows) and `bert.training` (the loop).

- `QuestionAnsweringBatches`: the windows of `SquadFeatures` as shuffled micro-batches of tensors,
  one rank's share of each global batch (bert.global_batch), reshuffled every epoch from
  (seed, epoch), resumable at a sample position; each batch is cut to its longest sequence (padding beyond it does nothing but
  cost time), and with `length_binning` made of windows of similar length (bert.binning, as the
  pretraining loader does): SQuAD's windows fill about half of 384 tokens, but a
  random batch of 32 almost always holds one full window, so cutting alone saves little.
- `question_answering_objective`: what `bert.training.train` minimises: the span loss, a mean over
  the windows of the whole global batch.
"""

import logging
import math

import numpy as np
import torch
from torch import nn

from bert.binning import bin_by_length, window_batches
from bert.errors import UserError
from bert.global_batch import accumulation_steps, micro_slice
from bert.squad.features import SquadFeatures, trimmed_length
from bert.training import Objective

log = logging.getLogger(__name__)

TRAINING_ARRAYS = ("input_ids", "token_type_ids", "attention_mask", "start_positions", "end_positions")


class QuestionAnsweringBatches:
    """Micro-batches of SQuAD training windows for `bert.training.train`.

    Epoch e visits every window once in the order of a permutation drawn from (seed, e); global
    batch j (optimizer step j of the epoch) is windows [j*G, (j+1)*G) of it, of which rank r takes
    at micro-step m the slice bert.global_batch.micro_slice(m, r, W) of B windows. The last
    incomplete global batch is dropped, so every rank takes the same number of steps. With
    `length_binning`, each binning window of global batches of that order is sorted by length, cut
    into global batches again, and those are served in an order shuffled from (seed, e, window):
    the global batches still depend only on the seed, the epoch and the global batch size."""

    def __init__(
        self,
        features: SquadFeatures,
        global_batch_size: int,
        micro_batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        length_binning: bool = False,
    ):
        self.accumulation_steps = accumulation_steps(global_batch_size, micro_batch_size, world_size)
        self.arrays = {name: getattr(features, name) for name in TRAINING_ARRAYS}
        self.lengths = features.attention_mask.sum(axis=1)
        self.length_binning = length_binning
        self.global_batch, self.micro_batch = global_batch_size, micro_batch_size
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.epoch, self.start_batch = 0, 0
        self.batches_per_epoch = len(features) // global_batch_size  # global batches: optimizer steps
        if self.batches_per_epoch == 0:
            raise ValueError(f"{len(features)} training windows make no global batch of {global_batch_size}")

    def __len__(self) -> int:
        """This rank's micro-batches per epoch."""
        return self.batches_per_epoch * self.accumulation_steps

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.start_batch = epoch, 0

    def skip_samples(self, samples: int) -> None:
        """Start the current epoch after `samples` windows (counted over all ranks: whole global batches)."""
        if samples % self.global_batch:
            raise UserError(
                f"cannot resume at window {samples} of the epoch with a global batch of {self.global_batch}; "
                "keep finetune.global_batch_size as it was when the checkpoint was written"
            )
        self.start_batch = samples // self.global_batch

    def epoch_order(self) -> np.ndarray:
        """This epoch's windows, global batch after global batch (the incomplete last one dropped)."""
        global_batch = self.global_batch
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.lengths))
        order = order[: self.batches_per_epoch * global_batch]
        if not self.length_binning:
            return order
        binned = []
        window_rows = window_batches(global_batch) * global_batch
        for window, first in enumerate(range(0, len(order), window_rows)):
            rows = order[first : first + window_rows]
            by_length, batch_order = bin_by_length(
                self.lengths[rows], len(rows) // global_batch, self.seed, self.epoch, window
            )
            binned.append(rows[by_length].reshape(-1, global_batch)[batch_order].ravel())
        return np.concatenate(binned)

    def __iter__(self):
        order = self.epoch_order()
        for j in range(self.start_batch, self.batches_per_epoch):
            for micro_step in range(self.accumulation_steps):
                first = (
                    j * self.global_batch
                    + micro_slice(micro_step, self.rank, self.world_size) * self.micro_batch
                )
                yield self._batch(np.sort(order[first : first + self.micro_batch]))  # sorted: faster gathers
        self.start_batch = 0

    def _batch(self, rows: np.ndarray) -> dict[str, torch.Tensor]:
        batch = {name: array[rows] for name, array in self.arrays.items()}
        length = trimmed_length(batch["attention_mask"])
        return {
            name: torch.from_numpy(array[:, :length] if array.ndim == 2 else array).long()
            for name, array in batch.items()
        }


def steps_for_epochs(num_windows: int, epochs: float, global_batch_size: int) -> int:
    """Optimizer steps that cover `epochs` passes over the training windows (at least 1)."""
    return max(1, math.ceil(epochs * (num_windows // global_batch_size)))


def question_answering_loss(model: nn.Module, batch: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """The loss term "loss", the mean over the batch's windows of the mean of their start and end
    cross-entropies; how often the model already picks the exact gold span (start and end both
    right), and the share of token slots that held padding."""
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
    return {"loss": out.loss}, stats


def windows_per_term(batch: dict) -> dict[str, int]:
    """What the span loss averages over: the batch's windows (every training window holds its
    answer's positions, or 0 for [CLS], so none is left out)."""
    return {"loss": len(batch["start_positions"])}


question_answering_objective = Objective(question_answering_loss, windows_per_term)
