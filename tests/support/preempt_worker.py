"""Run by test_cluster under torchrun: two ranks train; only rank 1 gets SIGUSR1, during step 3."""

import os
import signal
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
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = build_optimizer(model, "adamw", 1e-2, 0.0)
    scheduler = warmup_poly_schedule(optimizer, 0, 50, power=1.0)

    def loss_fn(model, batch):
        if distributed.rank == 1 and scheduler.last_epoch == 2:  # step 3
            os.kill(os.getpid(), signal.SIGUSR1)
        return model(batch["x"]).pow(2).mean(), {}

    run_loop(model, [{"x": torch.randn(2, 4)}], per_row(loss_fn), optimizer, scheduler, max_steps=50,
             save_every=100, checkpoint_dir=sys.argv[1])  # fmt: skip


if __name__ == "__main__":
    run_main(main)
