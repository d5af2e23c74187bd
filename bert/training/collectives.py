"""What the ranks of a training run do together, from inside the run: who am I, sum, broadcast,
gather, wait; each works alone too (one process, no process group). The processes themselves are
started and joined by bert.distributed.launch (the launcher), which sits above the training loop and its
checkpoints; the loop, the checkpoints and the data loader use these, below it.
"""

import torch
import torch.distributed as dist

# What a pre-empting scheduler sends (SLURM's --signal, Kubernetes, a user's kill): torchrun passes
# them on to the ranks, which checkpoint at the next step boundary (bert.training.loop).
PREEMPTION_SIGNALS = ("SIGTERM", "SIGUSR1")


def rank_and_world_size() -> tuple[int, int]:
    """This process's rank and the number of processes: (0, 1) outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce_sum(values: torch.Tensor) -> torch.Tensor:
    """`values` summed over the ranks, in place (unchanged when running alone)."""
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(values)
    return values


def broadcast_from_main(value):
    """Rank 0's `value` on every rank (a choice one rank makes for all); `value` when running alone."""
    if dist.is_available() and dist.is_initialized():
        holder = [value]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]
    return value


def gather_to_all(value) -> list:
    """Every rank's `value`, in rank order, on every rank; [value] when running alone."""
    if dist.is_available() and dist.is_initialized():
        values = [None] * dist.get_world_size()
        dist.all_gather_object(values, value)
        return values
    return [value]


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for when running alone)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
