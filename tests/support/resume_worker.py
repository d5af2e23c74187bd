"""Run by test_cluster under torchrun: rank r works in the folder argv[1 + r] (nodes that do not share
a filesystem) and resumes a small run from its checkpoint folder `ckpt`."""

import os
import sys

import torch
from torch import nn

from bert.distributed.launch import setup_distributed
from bert.errors import run_main
from bert.training.loop import per_row
from bert.training.optim import build_optimizer, warmup_poly_schedule
from tests.support.loop import run_loop


def main() -> None:
    distributed = setup_distributed("gloo", 5)
    os.chdir(sys.argv[1 + distributed.rank])
    model = nn.Linear(4, 1)
    optimizer = build_optimizer(model, "adamw", 1e-2, 0.0)
    scheduler = warmup_poly_schedule(optimizer, 0, 4, power=1.0)
    batches = [{"x": torch.randn(2, 4)}]
    square = per_row(lambda m, b: (m(b["x"]).pow(2).mean(), {}))
    run_loop(model, batches, square, optimizer, scheduler, max_steps=4, save_every=2, checkpoint_dir="ckpt")


if __name__ == "__main__":
    run_main(main)
