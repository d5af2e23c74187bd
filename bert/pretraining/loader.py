"""The pretraining data loader: micro-batches from the HDF5 shards, the same on 1 or N ranks.

Each epoch has one global sample order: the shards in an order shuffled from (seed, epoch), each
shard's rows in file order (example creation already shuffled the instances). Global batch j (one
optimizer step) is rows [j*G, (j+1)*G) of that order (G = global batch size); rank r takes at
micro-step m the slice bert.training.global_batch.micro_slice(m, r, W) of B rows of it (B = micro-batch,
W = world size), read straight from its part of the shard files. So the rows of every optimizer
step depend only on the seed, the epoch and the global batch, not on W or the accumulation — which
is what lets a checkpoint resume on another number of GPUs, exactly.

Each micro-batch is cut to its longest real sequence (input_mask sum), rounded up to a multiple of
8 for the tensor cores: the model computes the same outputs for the real tokens, and the masked
positions stay valid, so a phase-2 batch of short pairs costs what it holds, not 512 columns.
With `length_binning`, global batches are also formed from sequences of similar length
(bert.training.binning), still a function of (seed, epoch, global batch) only, and so are their micro-batches.

The position inside an epoch is "global samples consumed", a multiple of G; `skip_samples` resumes
there exactly. Shards written with `masking="dynamic"` hold unmasked pairs: the loader masks each
piece of a batch with bert.pretraining.masking.mask_batch and an rng seeded from (seed, epoch, shard, first
row), so masks change every epoch and a resumed run draws the same masks as an uninterrupted one.

Loader worker processes outlive the pre-emption signals (SIGTERM, SIGUSR1) unless their own rank
sends them: the rank stops at its next step boundary and checkpoints (bert.training.loop), and needs
them until then. They are in the rank's process group, which torchrun signals as a whole, and a
scheduler's `scancel` signals every process: a worker that died of it would end the rank mid-step.
"""

import contextlib
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from bert.errors import UserError
from bert.pretraining.hdf5 import NAMES, describe_shards
from bert.pretraining.masking import mask_batch
from bert.text.tokenization import TokenLayout, continuation_table, load_tokenizer
from bert.training.binning import bin_by_length, window_batches
from bert.training.collectives import PREEMPTION_SIGNALS
from bert.training.global_batch import accumulation_steps, micro_slice

PAD_TO_MULTIPLE = 8  # tensor-core friendly widths, and at most S/8 shapes for torch.compile


@dataclass
class DynamicMasking:
    """What bert.pretraining.masking.mask_batch needs to mask unmasked pairs on the fly."""

    masked_lm_prob: float
    max_predictions: int
    replaceable: np.ndarray  # ids a masked position may be replaced by at random
    mask_id: int
    never_masked: tuple[int, ...]  # the template's special tokens and padding: [CLS], [SEP], [PAD]
    continuation: np.ndarray | None = None  # bool per token id, True for "##" pieces: whole-word masking

    @classmethod
    def from_vocab(
        cls, vocab_file: str | Path, masked_lm_prob: float, max_predictions: int, whole_word_mask: bool
    ) -> "DynamicMasking":
        """From the vocab stage's vocab.txt or tokenizer.json. The stored ids of a WordPiece
        vocabulary tell where words start (`##`); other tokenizers' ids do not."""
        tokenizer = load_tokenizer(vocab_file)
        layout = TokenLayout.of(tokenizer, vocab_file)
        continuation = None
        if whole_word_mask:
            if layout.kind != "wordpiece":
                raise UserError(
                    f"{vocab_file}: examples.whole_word_mask with examples.masking: dynamic needs a WordPiece "
                    f"vocabulary (its `##` pieces mark words), not {layout.kind}; set examples.masking: static"
                )
            continuation = continuation_table(tokenizer)
        # what example creation never picks: the template's tokens and padding (text's [UNK] is maskable)
        template = (*layout.pair_before, *layout.pair_between, *layout.pair_after, *layout.single_before)
        never = tuple(sorted({*template, *layout.single_after, layout.pad}))
        return cls(
            masked_lm_prob, max_predictions, layout.replaceable_ids(), layout.mask, never, continuation
        )


class PretrainingData:
    """Micro-batches (dicts of int64 tensors named as BertForPreTraining.forward's arguments) of
    one rank, `accumulation_steps` per optimizer step; one pass over it is one epoch. `set_epoch`
    and `skip_samples` are what the training loop calls to follow epochs and to resume."""

    def __init__(
        self,
        files: list[str | Path],
        global_batch_size: int,
        micro_batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        num_workers: int = 0,
        pin_memory: bool = False,
        masking: DynamicMasking | None = None,
        length_binning: bool = False,
    ):
        self.files = sorted(Path(f) for f in files)
        if not self.files:
            raise UserError("no pretraining shards (*.hdf5) found; run the examples stage first")
        self.sizes, dynamic = describe_shards(self.files)
        if any(dynamic) and masking is None:
            raise UserError(
                f"{self.files[dynamic.index(True)]}: shard asks for dynamic masking, but no masking config was given"
            )
        self.masking = masking if any(dynamic) else None
        self.dynamic = dynamic
        self.accumulation_steps = accumulation_steps(global_batch_size, micro_batch_size, world_size)
        self.global_batch, self.micro_batch = global_batch_size, micro_batch_size
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.num_workers, self.pin_memory = num_workers, pin_memory
        self.length_binning = length_binning
        self.batches_per_epoch = sum(self.sizes) // self.global_batch  # global batches: optimizer steps
        if self.batches_per_epoch == 0:
            raise UserError(
                f"{len(self.files)} shards hold {sum(self.sizes)} sequences, fewer than one global batch "
                f"({global_batch_size}); lower global_batch_size or create more examples"
            )
        self.epoch = 0
        self._start = 0

    def __len__(self) -> int:
        """This rank's micro-batches per epoch."""
        return self.batches_per_epoch * self.accumulation_steps

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def skip_samples(self, samples: int) -> None:
        """Start the next pass after `samples` global samples of the current epoch."""
        if samples % self.global_batch:
            raise UserError(
                f"cannot resume at sample {samples} of the epoch with a global batch of {self.global_batch}; "
                "keep global_batch_size as it was when the checkpoint was written"
            )
        self._start = samples // self.global_batch * self.accumulation_steps

    def __iter__(self):
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.files))
        batches = EpochBatches(self, order)
        sampler = range(self._start, len(self))
        self._start = 0
        loader = DataLoader(
            batches,
            batch_size=None,  # the dataset returns whole batches: one contiguous read each
            sampler=sampler,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            prefetch_factor=4 if self.num_workers else None,
            # Worker seeds from this generator, not from torch's global RNG: starting an epoch's
            # workers must not shift the dropout draws, or a resumed run would differ.
            generator=torch.Generator().manual_seed(self.seed * 1000003 + self.epoch),
            worker_init_fn=ignore_preemption_signals,
        )
        # Workers are born with the signals blocked (a fork keeps the forking thread's mask), so
        # one sent while a worker is still starting waits for its handler instead of killing it.
        with preemption_signals_blocked():
            workers = iter(loader)
        yield from workers


@contextlib.contextmanager
def preemption_signals_blocked():
    """Hold the pre-emption signals pending in this thread; they are delivered when it ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {getattr(signal, name) for name in PREEMPTION_SIGNALS})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def ignore_preemption_signals(worker_id: int) -> None:
    """A loader worker's start: outlive a pre-emption signal (see the module's docstring), yet end
    when its rank ends it. The signals are blocked and a thread takes them: one from the rank (the
    DataLoader terminating its workers, at exit) ends the worker, as torch's own handler would;
    any other is dropped. The worker also exits by itself when the rank is gone (torch's watchdog)."""
    signals = {getattr(signal, name) for name in PREEMPTION_SIGNALS}
    if not hasattr(signal, "sigwaitinfo"):  # not on macOS: ignore them (the watchdog still ends it)
        for signum in signals:
            signal.signal(signum, signal.SIG_IGN)
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # threads started later inherit the mask
    threading.Thread(target=_exit_on_a_signal_from, args=(os.getppid(), signals), daemon=True).start()


def _exit_on_a_signal_from(rank_pid: int, signals: set) -> None:
    while True:
        if signal.sigwaitinfo(signals).si_pid == rank_pid:
            os._exit(0)


class EpochBatches(Dataset):
    """Micro-batch k of one rank in one epoch; file handles are opened lazily in each worker process."""

    def __init__(self, data: PretrainingData, order: np.ndarray):
        self.data = data
        self.order = order
        sizes = np.array(data.sizes, dtype=np.int64)[order]
        self.starts = np.concatenate([[0], np.cumsum(sizes)])  # first global row of each shard in this epoch
        self.handles: dict[int, h5py.File] = {}
        self.window: tuple | None = None  # (index, sorted rows, batch order) of the last window read

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, k: int) -> dict[str, torch.Tensor]:
        data = self.data
        step, micro_step = divmod(k, data.accumulation_steps)  # global batch, and micro-step in it
        offset = micro_slice(micro_step, data.rank, data.world_size) * data.micro_batch
        if data.length_binning:
            return to_tensors(self._binned_batch(step, offset))
        first = step * data.global_batch + offset
        return to_tensors(self._rows(first, first + data.micro_batch))

    def _rows(self, first: int, end: int) -> dict[str, np.ndarray]:
        """Rows [first, end) of this epoch's global order, read as contiguous pieces of shards."""
        pieces = []
        row = first
        while row < end:
            slot = int(np.searchsorted(self.starts, row, side="right")) - 1
            shard = int(self.order[slot])
            begin = row - int(self.starts[slot])
            count = min(end - row, self.data.sizes[shard] - begin)
            pieces.append(self._read(shard, begin, begin + count))
            row += count
        return {key: np.concatenate([p[key] for p in pieces]) for key in pieces[0]}

    def _binned_batch(self, step: int, offset: int) -> dict[str, np.ndarray]:
        data = self.data
        window, index = divmod(step, window_batches(data.global_batch))
        if self.window is None or self.window[0] != window:
            self.window = (window, *self._read_window(window))
        _, rows, batch_order = self.window
        first = batch_order[index] * data.global_batch + offset
        return {key: values[first : first + data.micro_batch] for key, values in rows.items()}

    def _read_window(self, window: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """A window's rows sorted by real length, and the order its global batches are served in.
        Every rank (and worker) reads the whole window: sorting needs all its lengths, and a
        rank's rows are spread over it."""
        data = self.data
        size = window_batches(data.global_batch)
        batches = min(size, data.batches_per_epoch - window * size)
        first = window * size * data.global_batch
        rows = self._rows(first, first + batches * data.global_batch)
        lengths = rows["input_mask"].sum(axis=1)
        by_length, batch_order = bin_by_length(lengths, batches, data.seed, data.epoch, window)
        return {key: values[by_length] for key, values in rows.items()}, batch_order

    def _read(self, shard: int, begin: int, end: int) -> dict[str, np.ndarray]:
        if shard not in self.handles:
            self.handles[shard] = h5py.File(self.data.files[shard], "r")
        handle = self.handles[shard]
        piece = {key: handle[key][begin:end] for key in NAMES if key in handle}  # MLM only: no NSP labels
        if self.data.dynamic[shard]:
            piece.update(self._mask(piece, shard, begin))
        return piece

    def _mask(self, piece: dict[str, np.ndarray], shard: int, begin: int) -> dict[str, np.ndarray]:
        spec = self.data.masking
        input_ids = piece["input_ids"]
        candidate = piece["input_mask"].astype(bool) & ~np.isin(input_ids, spec.never_masked)
        word_start = None if spec.continuation is None else ~spec.continuation[input_ids]
        rng = np.random.default_rng([self.data.seed, self.data.epoch, shard, begin])
        masked, positions, labels = mask_batch(
            input_ids,
            candidate,
            word_start,
            spec.masked_lm_prob,
            spec.max_predictions,
            spec.replaceable,
            spec.mask_id,
            rng,
        )
        return {"input_ids": masked, "masked_lm_positions": positions, "masked_lm_ids": labels}


def to_tensors(batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """A batch as BertForPreTraining's int64 arguments, cut to its longest real sequence rounded
    up to a multiple of PAD_TO_MULTIPLE (never longer than the shard's rows)."""
    seq_len = batch["input_ids"].shape[1]
    longest = max(1, int(batch["input_mask"].sum(axis=1).max()))
    width = min(seq_len, -(-longest // PAD_TO_MULTIPLE) * PAD_TO_MULTIPLE)

    def column(key: str, cut: bool = False) -> torch.Tensor:
        values = batch[key][:, :width] if cut else batch[key]
        return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64))

    tensors = {
        "input_ids": column("input_ids", cut=True),
        "token_type_ids": column("segment_ids", cut=True),
        "attention_mask": column("input_mask", cut=True),
        "masked_lm_positions": column("masked_lm_positions"),
        "masked_lm_ids": column("masked_lm_ids"),
    }
    if "next_sentence_labels" in batch:  # not in MLM-only shards
        tensors["next_sentence_labels"] = column("next_sentence_labels").reshape(-1)
    return tensors
