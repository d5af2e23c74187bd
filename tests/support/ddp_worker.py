"""Run by test_distributed under torchrun, through the stages' launcher: a small DDP training run
in which one rank fails."""

import sys
from types import SimpleNamespace

import torch
from torch import nn

from bert.distributed.launch import Distributed, launch
from bert.training.loop import per_row
from bert.training.optim import build_optimizer, warmup_poly_schedule
from tests.support.loop import run_loop


def main() -> None:
    settings = SimpleNamespace(nproc_per_node=2, nnodes=1, backend="gloo", threads_per_rank="auto")
    launch(["tests.support.ddp_worker", sys.argv[1]], [], "ddp_worker RANK", settings,
           lambda distributed: work(int(sys.argv[1]), distributed), checkpoint_dir="", log_dir="logs")  # fmt: skip


def work(failing_rank: int, distributed: Distributed) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = build_optimizer(model, "adamw", 1e-2, 0.0)
    scheduler = warmup_poly_schedule(optimizer, 0, 50, power=1.0)
    batches = [{"x": torch.randn(2, 4)} for _ in range(4)]

    def loss_fn(model, batch):
        if distributed.rank == failing_rank and scheduler.last_epoch == 3:
            raise RuntimeError(f"rank {distributed.rank} failed on purpose at step 3")
        return model(batch["x"]).pow(2).mean(), {}

    run_loop(model, batches, per_row(loss_fn), optimizer, scheduler, max_steps=50)


if __name__ == "__main__":
    main()
