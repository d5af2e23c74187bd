"""The processes of a training run: a stage that asks for more than one starts itself again under
torchrun (one process per GPU of every node); each of those joins torchrun's process group.

    if relaunch_under_torchrun(["stages.pretrain", phase], nproc_per_node, nnodes, rdzv_endpoint):
        return  # the ranks did the work
    distributed = setup_distributed(backend)
"""

import logging
import os
import subprocess
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from bert.errors import UserError

log = logging.getLogger(__name__)


@dataclass
class Distributed:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(backend: str = "auto") -> Distributed:
    """Join the process group torchrun set up (RANK/WORLD_SIZE in the environment), or run alone.
    backend auto: nccl on CUDA, gloo on CPU. Each process uses the GPU of its LOCAL_RANK."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
        log.info("rank %d of %d on %s (%s)", rank, world_size, device, backend)
    return Distributed(rank, local_rank, world_size, device)


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


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for when running alone)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def torchrun_command(
    module_args: list[str], nproc_per_node: int, nnodes: int, rdzv_endpoint: str
) -> list[str]:
    """The command that starts `python -m <module_args>` on every GPU of every node."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc-per-node", str(nproc_per_node),
        "--nnodes", str(nnodes),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", rdzv_endpoint,
        "-m", *module_args,
    ]  # fmt: skip


def relaunch_under_torchrun(
    module_args: list[str], nproc_per_node: int, nnodes: int, rdzv_endpoint: str
) -> bool:
    """When the run asks for more than one process and this process is not one of torchrun's
    yet: run `python -m <module_args>` again under torchrun and return True once every rank has
    finished (UserError when one failed: torchrun stops the others and prints the failed rank's
    error). False when this process is the run's (alone, or a rank) and should do the work."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ
    if nproc_per_node * nnodes == 1 or under_torchrun:
        return False
    command = torchrun_command(module_args, nproc_per_node, nnodes, rdzv_endpoint)
    log.info("launching %d x %d processes: %s", nnodes, nproc_per_node, " ".join(command))
    status = subprocess.run(command).returncode
    if status:
        raise UserError(
            f"python -m {' '.join(module_args)} failed on at least one rank (exit status {status}); "
            "see the rank's error above"
        )
    return True
