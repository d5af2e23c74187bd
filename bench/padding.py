"""Padding waste and training speed on real pretraining shards: batches padded to the full
sequence length (the loader before), cut to their longest sequence (now always), length-binned,
each of the last two also with the unpadded encoder.

    python -m bench.padding data/examples/phase2 --size mini --batch 8 --threads 1

Use --threads 1 on a machine shared with other work: with 2+ threads, every small op waits for
a descheduled thread, which punishes the many small per-sequence attention calls of the CPU path.

Padding waste is the share of the token slots in the batches that hold padding, over one whole
epoch of the loader (rank 0 of 1). Speed is sequences/s of forward + backward (no optimizer step:
it does not depend on the batch shape) on the epoch's first `--batches` batches (by default one
binning window: the same sequences in every variant), the
variants taking turns round by round; the fastest round counts (a shared machine slows all alike).
"""

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from bert.model.config import BertConfig
from bert.model.network import BertForPreTraining
from bert.pretraining.loader import PretrainingData
from bert.training.binning import BIN_WINDOW

VARIANTS = ("full_length", "trimmed", "trimmed_unpadded", "binned", "binned_unpadded")


def epoch_batches(shards: list[Path], batch_size: int, binning: bool, seed: int) -> list[dict]:
    return list(
        PretrainingData(
            shards,
            global_batch_size=batch_size,
            micro_batch_size=batch_size,
            seed=seed,
            length_binning=binning,
        )
    )


def to_full_length(batch: dict, seq_len: int) -> dict:
    """A batch padded back to the shards' width, as the loader served it before trimming."""
    widened = {k: F.pad(v, (0, seq_len - v.shape[1])) for k, v in batch.items() if k in ("input_ids", "token_type_ids", "attention_mask")}  # fmt: skip
    return {**batch, **widened}


def padding_waste(batches: list[dict]) -> float:
    masks = [batch["attention_mask"] for batch in batches]
    return 1 - sum(int(m.sum()) for m in masks) / sum(m.numel() for m in masks)


def time_variants(
    model: BertForPreTraining, variants: dict[str, list[dict]], rounds: int
) -> dict[str, float]:
    """Fastest round's sequences/s of forward + backward of each variant's batches."""
    best = dict.fromkeys(variants, 0.0)
    for _ in range(rounds):
        for name, batches in variants.items():
            model.bert.unpad = name.endswith("unpadded")
            started = time.perf_counter()
            for batch in batches:
                model(**batch).loss.backward()
            model.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - started
            best[name] = max(best[name], sum(len(b["input_ids"]) for b in batches) / seconds)
    return best


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.padding", description=__doc__.split("\n\n")[0])
    parser.add_argument("shards", type=Path, help="a folder of pretraining *.hdf5 shards")
    parser.add_argument("--size", default="mini", help="tiny | mini | base | large (random weights)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--batches", type=int, default=BIN_WINDOW,
                        help="timed batches per variant and round (default: one binning window)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    shards = sorted(args.shards.glob("*.hdf5"))
    trimmed = epoch_batches(shards, args.batch, binning=False, seed=args.seed)
    binned = epoch_batches(shards, args.batch, binning=True, seed=args.seed)
    seq_len = _width(shards)
    full = [to_full_length(batch, seq_len) for batch in trimmed]
    result = {
        "shards": str(args.shards),
        "sequences": sum(len(b["input_ids"]) for b in trimmed),
        "seq_len": seq_len,
        "batch": args.batch,
        "padding_waste": {
            "full_length": padding_waste(full),
            "trimmed": padding_waste(trimmed),
            "binned": padding_waste(binned),
        },
    }
    torch.manual_seed(0)
    vocab_size = int(max(int(b["input_ids"].max()) for b in trimmed)) + 1
    model = BertForPreTraining(BertConfig.resolve(args.size, vocab_size)).train()
    # The first BIN_WINDOW batches hold the same sequences in every variant (binning reorders
    # within windows of that many batches), so the variants are timed on the same data.
    n = args.batches
    variants = {"full_length": full[:n], "trimmed": trimmed[:n], "trimmed_unpadded": trimmed[:n],
                "binned": binned[:n], "binned_unpadded": binned[:n]}  # fmt: skip
    speed = time_variants(model, variants, args.rounds)
    result.update(size=args.size, threads=torch.get_num_threads(), torch=torch.__version__)
    result["sequences_per_second"] = speed
    result["speedup_over_full_length"] = {name: speed[name] / speed["full_length"] for name in VARIANTS}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _width(shards: list[Path]) -> int:
    import h5py

    with h5py.File(shards[0], "r") as shard:
        return shard["input_ids"].shape[1]


if __name__ == "__main__":
    main()
