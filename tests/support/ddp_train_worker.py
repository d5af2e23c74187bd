"""A tiny pretraining run on the shards of a folder, one process of it per rank (run alone, or by
test_distributed under torchrun): `python -m tests.support.ddp_train_worker SHARDS GLOBAL MICRO OUT [MICRO OUT]...`
trains once per (micro-batch size, output file) pair and rank 0 saves the weights and figures."""

import sys
from pathlib import Path

import torch

from bert.distributed.launch import setup_distributed
from bert.pretraining.loader import PretrainingData
from bert.pretraining.loss import pretraining_objective
from bert.training.collectives import rank_and_world_size
from bert.training.optim import build_optimizer, warmup_poly_schedule
from tests.support.loop import run_loop
from tests.support.shard_fixtures import tiny_model

STEPS = 4


def train_tiny(shards: list[Path], global_batch_size: int, micro_batch_size: int) -> tuple[dict, dict]:
    """Weights and summary after STEPS steps, without dropout: the same on any split of the global batch."""
    rank, world_size = rank_and_world_size()
    model = tiny_model(seed=0, dropout=0.0)
    optimizer = build_optimizer(model, "lamb", 1e-2, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, STEPS, power=0.5)
    data = PretrainingData(
        shards,
        global_batch_size,
        micro_batch_size,
        seed=3,
        rank=rank,
        world_size=world_size,
        length_binning=True,
    )
    summary = run_loop(model, data, pretraining_objective, optimizer, scheduler, max_steps=STEPS, log_every=1)
    return model.state_dict(), summary


def main() -> None:
    torch.set_num_threads(1)
    folder, global_batch_size, *runs = sys.argv[1:]
    distributed = setup_distributed("gloo", 5)
    shards = sorted(Path(folder).glob("*.hdf5"))
    for micro_batch_size, out in zip(runs[::2], runs[1::2]):
        weights, summary = train_tiny(shards, int(global_batch_size), int(micro_batch_size))
        if distributed.is_main:
            torch.save({"weights": weights, "summary": summary}, out)


if __name__ == "__main__":
    main()
