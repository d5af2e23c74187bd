"""Fine-tuning's data and length, for SQuAD, SWAG and GLUE alike; the run itself is built as
every training run is (bert.training.run.TrainingRun: optimizer, schedule, checkpoints' signature)
and trained by `bert.training.loop`.

- `FineTuningBatches`: training examples (arrays whose first axis is the example) as shuffled
  micro-batches of tensors, one rank's share of each global batch (bert.training.global_batch), reshuffled
  every epoch from (seed, epoch), resumable at a sample position; each batch is cut to its longest
  sequence (padding beyond it does nothing but cost time), and with `length_binning` made of
  examples of similar length (bert.training.binning, as the pretraining loader does): SQuAD's windows fill
  about half of 384 tokens, but a random batch of 32 almost always holds one full window, so
  cutting alone saves little.
- `described_files`: the files a run learns from, by content, for its description.

The objective is the caller's (a `bert.training.loop.Objective`): SQuAD's is
bert.squad.objective's, SWAG's and GLUE's bert.tasks.objective's, so that an edit of one reruns
only its own stages.
"""

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from bert.errors import UserError
from bert.training.binning import bin_by_length, sequence_lengths, trimmed_length, window_batches
from bert.training.checkpoints import file_sha256
from bert.training.global_batch import accumulation_steps, micro_slice


class FineTuningBatches:
    """Micro-batches of fine-tuning examples (SQuAD windows, task examples) for `bert.training.loop.train`.

    `arrays` are the model's keyword arguments, every one with the example as its first axis; those
    with a token axis have it last ([N, S], or [N, C, S] for examples of C choices), and the batch
    is cut along it to its longest sequence, read from "attention_mask".
    Epoch e visits every window once in the order of a permutation drawn from (seed, e); global
    batch j (optimizer step j of the epoch) is windows [j*G, (j+1)*G) of it, of which rank r takes
    at micro-step m the slice bert.training.global_batch.micro_slice(m, r, W) of B windows. The last
    incomplete global batch is dropped, so every rank takes the same number of steps. With
    `length_binning`, each binning window of global batches of that order is sorted by length, cut
    into global batches again, and those are served in an order shuffled from (seed, e, window):
    the global batches still depend only on the seed, the epoch and the global batch size."""

    def __init__(
        self,
        arrays: Mapping[str, np.ndarray],
        global_batch_size: int,
        micro_batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        length_binning: bool = False,
    ):
        self.accumulation_steps = accumulation_steps(global_batch_size, micro_batch_size, world_size)
        self.arrays = dict(arrays)
        self.lengths = sequence_lengths(self.arrays["attention_mask"])
        self.num_examples = examples = len(self.lengths)
        self.length_binning = length_binning
        self.global_batch, self.micro_batch = global_batch_size, micro_batch_size
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.epoch, self.start_batch = 0, 0
        self.batches_per_epoch = examples // global_batch_size  # global batches: optimizer steps
        if self.batches_per_epoch == 0:
            raise ValueError(f"{examples} training examples make no global batch of {global_batch_size}")

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
        # Token ids, masks and class labels as int64 (what embeddings and cross-entropy take),
        # regression targets as float32.
        return {
            name: _tensor(array[..., :length] if name in TOKEN_ARRAYS else array)
            for name, array in batch.items()
        }


TOKEN_ARRAYS = ("input_ids", "token_type_ids", "attention_mask")


def _tensor(array: np.ndarray) -> torch.Tensor:
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    return tensor.float() if array.dtype.kind == "f" else tensor.long()


def described_files(paths: list[Path]) -> list[tuple[str, str | None]]:
    """Each file's name and content hash, for a run description: contents, not mtimes (a `dvc
    checkout` changes those), so new initial weights of the same shape or an edited training file
    never resume the checkpoints of the old ones."""
    return [(path.name, file_sha256(path)) for path in paths]
