"""The HDF5 file of pretraining instances that the `examples` stage writes and the trainer reads.

One file holds N instances of S tokens with up to P masked positions each, as NVIDIA's
run_pretraining.py reads them:

    input_ids             int32 [N, S]   [CLS] A [SEP] B [SEP], then [PAD] (0 in BERT's vocabularies)
    input_mask            int8  [N, S]   1 for real tokens
    segment_ids           int8  [N, S]   1 for the tokens of B (the type id the tokenizer's template gives B)
    masked_lm_positions   int32 [N, P]   unused slots are 0
    masked_lm_ids         int32 [N, P]   unused slots are 0
    next_sentence_labels  int8  [N]      1 = B is a random next segment

MLM-only shards (examples.next_sentence: false) have no `next_sentence_labels` and hold
`[CLS] sentences... [SEP]` with segment_ids 0 (bert.pretraining.instances.create_packed).
File attributes say how it was masked: `masking` is "static" (masked once, here) or "dynamic"
(unmasked pairs: the loader masks them each epoch with `masked_lm_prob`, `whole_word_mask`), and
`max_seq_length`, `max_predictions_per_seq`. Datasets are written with track_times=False, so the
same instances give the same bytes.
"""

import io
from pathlib import Path

import h5py
import numpy as np

from bert.errors import UserError

# (name, dtype, second dimension: "seq", "pred" or None)
LAYOUT = (
    ("input_ids", np.int32, "seq"),
    ("input_mask", np.int8, "seq"),
    ("segment_ids", np.int8, "seq"),
    ("masked_lm_positions", np.int32, "pred"),
    ("masked_lm_ids", np.int32, "pred"),
    ("next_sentence_labels", np.int8, None),
)
NAMES = tuple(name for name, _, _ in LAYOUT)
NSP_LABELS = "next_sentence_labels"  # the one dataset an MLM-only shard lacks
MLM_NAMES = tuple(name for name in NAMES if name != NSP_LABELS)
# HDF5 filters per dtype, chosen for write speed (writing was the costliest step), all built into
# every HDF5 library, so plain f[key][:] reads them anywhere. Measured on 27k instances of 128:
# - int32 (token ids, positions): scale-offset with scaleoffset=0 packs each chunk's values into
#   the fewest bits that hold them exactly (15 for ids < 32768): input_ids 29 ms, 6.6 MB; lzf +
#   shuffle 86 ms, 5.9 MB; gzip-1 212 ms, 5.7 MB; none 8 ms, 14.2 MB.
# - int8 (masks, segment ids, labels; long runs of 0 and 1): gzip level 1: input_mask 9 ms,
#   0.06 MB; lzf 10 ms, 0.09 MB; scale-offset 19 ms, 0.45 MB.
# All datasets: 58 ms, 8.4 MB, where lzf + shuffle takes 150 ms for 7.8 MB.
HDF5_FILTERS = {np.int32: {"scaleoffset": 0}, np.int8: {"compression": "gzip", "compression_opts": 1}}
ROWS_PER_HDF5_CHUNK = 1024


def shard_attrs(config) -> dict:
    """The file attributes for a bert.pretraining.instances.ExampleConfig: how the shard was masked
    (and how to mask it, if dynamic)."""
    return {
        "masking": "dynamic" if config.dynamic_masking else "static",
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "masked_lm_prob": config.masked_lm_prob,
        "whole_word_mask": config.whole_word_mask,
    }


class ShardWriter:
    """Appends batches of instances to a new HDF5 file at `path`. The caller makes the file
    complete-or-absent (bert.atomic: a file of its own, or one of a folder's files): on an error
    this leaves a partial file for it to remove. `compressed=False` is for intermediate files
    that are copied into compressed ones: one compression instead of two."""

    def __init__(
        self,
        path: str | Path,
        max_seq_length: int,
        max_predictions: int,
        attrs: dict,
        compressed: bool = True,
        next_sentence: bool = True,
    ):
        self.raw = WriteFailureLatch(Path(path))
        self.file = h5py.File(self.raw, "w")
        self.rows = 0
        self.layout = [entry for entry in LAYOUT if next_sentence or entry[0] != NSP_LABELS]
        widths = {"seq": max_seq_length, "pred": max_predictions, None: None}
        # One handle per dataset for the file's whole life, flushed in LAYOUT order at the end:
        # HDF5 places a chunk when it leaves the chunk cache, which a dataset's last handle
        # closing also does. Handles opened per append closed whenever Python freed them (later
        # in a Dask worker), which moved the chunks: same rows, other file bytes.
        self.datasets = []
        for name, dtype, width in self.layout:
            shape = (0,) if widths[width] is None else (0, widths[width])
            dataset = self.file.create_dataset(
                name,
                shape=shape,
                maxshape=(None,) + shape[1:],
                chunks=(ROWS_PER_HDF5_CHUNK,) + shape[1:],
                dtype=dtype,
                track_times=False,
                **(HDF5_FILTERS[dtype] if compressed else {}),
            )
            self.datasets.append(dataset)
        for key, value in sorted(attrs.items()):
            self.file.attrs[key] = value

    def append(self, batch: dict[str, np.ndarray]) -> None:
        count = len(batch["input_ids"])
        for dataset, (name, dtype, _) in zip(self.datasets, self.layout):
            dataset.resize(self.rows + count, axis=0)
            dataset[self.rows :] = batch[name].astype(dtype, copy=False)
        self.rows += count
        self.raw.raise_failure()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        for dataset in self.datasets:
            dataset.id.flush()
        self.datasets.clear()
        self.file.close()
        self.raw.close()
        self.raw.raise_failure()  # a write that failed while closing (the last chunks)


class WriteFailureLatch(io.FileIO):
    """A binary file for h5py's file-object driver that remembers its first failed write (disk
    full, file size limit) instead of raising it into HDF5, and drops the writes after it.

    Why: HDF5 (h5py 3.x, HDF5 1.14/2.0) crashes the process with SIGSEGV when it closes a file
    whose writes failed, so a full disk killed the examples stage without a word. Here HDF5 never
    sees a failure; ShardWriter raises the remembered OSError itself (after each append and after
    closing), and the caller's bert.atomic removes the partial file, which is garbage anyway."""

    failure: OSError | None = None

    def __init__(self, path: Path):
        super().__init__(path, "w+")

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        while view and self.failure is None:
            try:
                view = view[super().write(view) :]  # a raw write may be short: write the rest
            except OSError as error:
                self.failure = error
        return size

    def truncate(self, size: int | None = None) -> int:
        if self.failure is None:
            try:
                return super().truncate(size)
            except OSError as error:
                self.failure = error
        return self.tell() if size is None else size

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def names_in(file: h5py.File) -> tuple[str, ...]:
    """The datasets of a shard, in LAYOUT order: all of them, or MLM_NAMES for an MLM-only one."""
    return NAMES if NSP_LABELS in file else MLM_NAMES


def read_shard(path: str | Path) -> dict[str, np.ndarray]:
    """All datasets of a shard as arrays (for tests and tools; the trainer streams)."""
    with h5py.File(path, "r") as file:
        return {name: file[name][:] for name in names_in(file)}


def describe_shards(files: list[Path]) -> tuple[list[int], list[bool]]:
    """Rows and dynamic-masking flag of each shard, checking the layout on the way: a batch takes
    rows from several shards, so they must all have the widths of the first, and all or none of
    them next-sentence labels."""
    sizes, dynamic, first_widths, first_names = [], [], None, None
    for path in files:
        try:
            with h5py.File(path, "r") as shard:
                missing = [name for name in MLM_NAMES if name not in shard]
                if missing:
                    raise UserError(f"{path}: not a pretraining shard, datasets {missing} are missing")
                names = names_in(shard)
                if first_names is not None and names != first_names:
                    raise UserError(
                        f"{path}: {'has' if NSP_LABELS in names else 'lacks'} {NSP_LABELS} but {files[0]} "
                        "does not: the shards of a phase come from one examples run; re-run the examples stage"
                    )
                first_names = names
                rows = {len(shard[name]) for name in names}
                if len(rows) != 1:
                    raise UserError(f"{path}: datasets have different numbers of rows {sorted(rows)}")
                widths = _widths(path, shard)
                masking = shard.attrs.get("masking", "static")
                masking = masking.decode() if isinstance(masking, bytes) else str(masking)
        except OSError as error:
            raise UserError(f"{path}: cannot read HDF5 shard ({error}); re-run the examples stage") from None
        if first_widths is None:
            first_widths = widths
        elif widths != first_widths:
            raise UserError(
                f"{path}: sequences of {widths[0]} tokens with {widths[1]} masked positions, but {files[0]} has "
                f"{first_widths[0]} and {first_widths[1]}: the shards of a phase come from one examples run; re-run "
                "the examples stage"
            )
        sizes.append(rows.pop())
        dynamic.append(masking == "dynamic")
    return sizes, dynamic


def _widths(path: Path, shard: h5py.File) -> tuple[int, int]:
    """(tokens, masked positions) per sequence of a shard, the same over each of its datasets."""
    found = {"seq": set(), "pred": set()}
    for name, _, width in LAYOUT:
        if name not in shard:  # an MLM-only shard's labels (describe_shards checked the rest)
            continue
        shape = shard[name].shape
        if len(shape) != (1 if width is None else 2):
            raise UserError(
                f"{path}: dataset {name} has shape {shape}, not the layout of a pretraining shard"
            )
        if width is not None:
            found[width].add(shape[1])
    if len(found["seq"]) != 1 or len(found["pred"]) != 1:
        raise UserError(
            f"{path}: its datasets disagree on the tokens per sequence {sorted(found['seq'])} or the "
            f"masked positions {sorted(found['pred'])}"
        )
    return found["seq"].pop(), found["pred"].pop()


def copy_instances(
    sources: list[tuple[str | Path, int, int]], output: str | Path, permutation_seed=None
) -> tuple[int, int]:
    """Write rows [start, stop) of each source shard, in order, into one new shard at `output`;
    with `permutation_seed` the rows are shuffled (in memory: the output shard is loaded whole).
    Returns (rows, real tokens) of the new shard, so no one reads it again to count them."""
    with h5py.File(sources[0][0], "r") as first:
        attrs = dict(first.attrs)
        max_seq_length, max_predictions = first["input_ids"].shape[1], first["masked_lm_ids"].shape[1]
        names = names_in(first)
    tokens = 0
    with ShardWriter(output, max_seq_length, max_predictions, attrs, next_sentence=names == NAMES) as writer:
        if permutation_seed is None:
            for path, start, stop in sources:
                with h5py.File(path, "r") as file:
                    for begin in range(start, stop, 64 * ROWS_PER_HDF5_CHUNK):
                        end = min(stop, begin + 64 * ROWS_PER_HDF5_CHUNK)
                        rows = {name: file[name][begin:end] for name in names}
                        writer.append(rows)
                        tokens += int(rows["input_mask"].sum(dtype=np.int64))
        else:
            parts = []
            for path, start, stop in sources:
                with h5py.File(path, "r") as file:
                    parts.append({name: file[name][start:stop] for name in names})
            merged = {name: np.concatenate([part[name] for part in parts]) for name in names}
            tokens = int(merged["input_mask"].sum(dtype=np.int64))
            order = np.random.default_rng(permutation_seed).permutation(len(merged["input_ids"]))
            for begin in range(0, len(order), 64 * ROWS_PER_HDF5_CHUNK):
                rows = order[begin : begin + 64 * ROWS_PER_HDF5_CHUNK]
                writer.append({name: array[rows] for name, array in merged.items()})
        return writer.rows, tokens
