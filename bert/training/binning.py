"""Length binning: batches of sequences of similar length, so that a batch cut to its longest
sequence carries little padding, in an order that still depends only on the seed, the epoch and
the global batch size (so any rank split, accumulation and exact resume hold with binning on).

An epoch's order is cut into windows of `window_batches(global_batch_size)` global batches; each
window's rows are sorted by length (ties broken at random), cut into global batches, and those
batches are served in an order shuffled within the window, all drawn from (seed, epoch, window).
A global batch is thus a run of sorted rows, and so is each micro-batch cut from it. The pretraining
loader (bert.pretraining.loader) and SQuAD fine-tuning (bert.training.finetune) both batch this way.
"""

import numpy as np

BIN_WINDOW = 64  # global batches sorted by length together, at most ...
BIN_WINDOW_ROWS = 4096  # ... and at most this many rows (every rank reads a whole window): a
# global batch of thousands of sequences (BERT-large's 65,536) is a window on its own, sorted
# into micro-batches of similar length.


def window_batches(global_batch_size: int) -> int:
    """Global batches per binning window (at least 1)."""
    return max(1, min(BIN_WINDOW, BIN_WINDOW_ROWS // global_batch_size))


def bin_by_length(
    lengths: np.ndarray, num_batches: int, seed: int, epoch: int, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """One window: the order that sorts its rows by length (ties broken at random), and the order
    in which the `num_batches` consecutive batches of that sorted order are served."""
    rng = np.random.default_rng([seed, epoch, window])
    return np.lexsort((rng.random(len(lengths)), lengths)), rng.permutation(num_batches)


def trimmed_length(attention_mask: np.ndarray) -> int:
    """The length of a batch's longest sequence (1 at least): the columns past it hold only
    padding. The mask is [N, S], or [N, C, S] for N examples of C choices each."""
    used = np.flatnonzero(attention_mask.reshape(-1, attention_mask.shape[-1]).any(axis=0))
    return int(used[-1]) + 1 if len(used) else 1


def sequence_lengths(attention_mask: np.ndarray) -> np.ndarray:
    """Each example's length: its real tokens, or for an example of several choices its longest choice's."""
    return attention_mask.reshape(len(attention_mask), -1, attention_mask.shape[-1]).sum(-1).max(-1)
