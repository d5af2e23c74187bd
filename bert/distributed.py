"""The processes of a training run: a stage that asks for more than one starts itself again under
torchrun (one process per GPU of every node); each of those joins torchrun's process group.
Every training stage runs through one launcher:

    launch(["stages.pretrain", phase], sys.argv[2:], usage, settings, lambda distributed: ...)

which reads `--join NODE_RANK` (a node other than the head), relaunches under torchrun when the
run asks for more than one process, joins the process group in each rank, runs the work and
leaves the group, whatever happened.

A lost rank must end the job, not hang the others: collectives time out after timeout_minutes, and
NCCL's asynchronous error handling (TORCH_NCCL_ASYNC_ERROR_HANDLING=1, unless the user set it)
turns a timeout or a failed peer into an exit that torchrun sees.
"""

import datetime
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

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


NCCL_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
# What a pre-empting scheduler sends (SLURM's --signal, Kubernetes, a user's kill): torchrun passes
# them on to the ranks, which checkpoint at the next step boundary (bert.training).
PREEMPTION_SIGNALS = ("SIGTERM", "SIGUSR1")


class LaunchSettings(Protocol):
    """Where and how a training run's processes start (params.yaml's `distributed`)."""

    nproc_per_node: int
    nnodes: int
    rdzv_endpoint: str
    backend: str  # auto | nccl | gloo
    timeout_minutes: float
    max_restarts: int


def launch(
    module_args: list[str],
    join_args: list[str],
    usage: str,
    settings: LaunchSettings,
    work: Callable[[Distributed], None],
    *,
    checkpoint_dir: str | os.PathLike,
) -> None:
    """Run a training stage: `python -m <module_args> [--join NODE_RANK]` (join_args: what follows
    the module's own arguments on its command line). In the process that is the run's (alone, or a
    rank under torchrun), call work(distributed) between joining and leaving the process group;
    otherwise start torchrun on this node and return once every rank has finished (a pre-empted
    run's line names the newest checkpoint in `checkpoint_dir` actually on disk)."""
    node_rank = node_rank_to_join(join_args, settings.nnodes, usage)
    if node_rank is None:
        raise UserError(f"usage: {usage}")
    if relaunch_under_torchrun(
        module_args,
        settings.nproc_per_node,
        settings.nnodes,
        settings.rdzv_endpoint,
        settings.max_restarts,
        node_rank,
        checkpoint_dir=checkpoint_dir,
    ):
        return
    distributed = setup_distributed(settings.backend, settings.timeout_minutes)
    try:
        work(distributed)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def setup_distributed(backend: str, timeout_minutes: float) -> Distributed:
    """Join the process group torchrun set up (RANK/WORLD_SIZE in the environment), or run alone.
    backend auto: nccl on CUDA, gloo on CPU. Each process uses the GPU of its LOCAL_RANK. A
    collective that waits longer than timeout_minutes (a lost peer) fails instead of hanging."""
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
        os.environ.setdefault(NCCL_ERROR_HANDLING, "1")  # ranks started by a torchrun of the user's own
        timeout = datetime.timedelta(minutes=timeout_minutes)
        dist.init_process_group(
            backend,
            device_id=device if backend == "nccl" else None,
            timeout=timeout,
            **_store_of_this_attempt(rank, world_size, timeout),
        )
        log.info("rank %d of %d on %s (%s)", rank, world_size, device, backend)
    return Distributed(rank, local_rank, world_size, device)


def _store_of_this_attempt(rank: int, world_size: int, timeout: datetime.timedelta) -> dict:
    """init_process_group's store when torchrun restarted the ranks (distributed.max_restarts):
    its agent keeps one store for every attempt, so a restarted rank would read the addresses
    the ranks of the failed attempt left there and wait for a dead peer ("Connection refused").
    Each attempt gets keys of its own. {} (the env:// default) for a first attempt."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt == "0" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return {}
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        is_master=False,
        timeout=timeout,
    )
    return {"store": dist.PrefixStore(f"attempt-{attempt}", store), "rank": rank, "world_size": world_size}


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


def torchrun_command(
    module_args: list[str],
    nproc_per_node: int,
    nnodes: int,
    rdzv_endpoint: str,
    max_restarts: int,
    node_rank: int = 0,
) -> list[str]:
    """The command that starts `python -m <module_args>` on the GPUs of node `node_rank`. torchrun
    restarts the ranks up to max_restarts times when one fails (each restart resumes from the
    newest checkpoint). On many nodes the rendezvous is
    static (rdzv_endpoint is node 0's address), so that global rank 0, which writes every output,
    runs on node 0: the node whose `dvc repro` records them."""
    if nnodes == 1:
        rendezvous = ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint]
    else:
        host, _, port = rdzv_endpoint.rpartition(":")
        rendezvous = ["--node-rank", str(node_rank), "--master-addr", host, "--master-port", port]
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc-per-node", str(nproc_per_node),
        "--nnodes", str(nnodes),
        *rendezvous,
        "--max-restarts", str(max_restarts),
        "-m", *module_args,
    ]  # fmt: skip


def node_rank_to_join(join_args: list[str], nnodes: int, usage: str) -> int | None:
    """The node rank that `--join NODE_RANK` asks for (1 .. nnodes - 1: node 0 is the head, whose
    stage runs under `dvc repro`); 0 without arguments; None for anything else (print `usage`)."""
    if not join_args:
        return 0
    if len(join_args) != 2 or join_args[0] != "--join" or not join_args[1].isdigit():
        return None
    node_rank = int(join_args[1])
    if not 1 <= node_rank < nnodes:
        raise UserError(
            f"--join {node_rank}: distributed.nnodes is {nnodes} in params.yaml, so the nodes that join "
            f"are 1 to {nnodes - 1} (node 0 runs `dvc repro`); usage: {usage}"
        )
    return node_rank


def relaunch_under_torchrun(
    module_args: list[str],
    nproc_per_node: int,
    nnodes: int,
    rdzv_endpoint: str,
    max_restarts: int,
    node_rank: int = 0,
    checkpoint_dir: str | os.PathLike | None = None,
) -> bool:
    """When the run asks for more than one process and this process is not one of torchrun's
    yet: run `python -m <module_args>` again under torchrun and return True once every rank has
    finished (UserError when one failed: torchrun stops the others and prints the failed rank's
    error). False when this process is the run's (alone, or a rank) and should do the work.
    A pre-emption signal sent to this process goes on to torchrun, which passes it to the ranks;
    the error that follows names the newest checkpoint of checkpoint_dir (the stage's) on disk."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ
    if nproc_per_node * nnodes == 1 or under_torchrun:
        return False
    command = torchrun_command(module_args, nproc_per_node, nnodes, rdzv_endpoint, max_restarts, node_rank)
    log.info(
        "launching %d processes on node %d of %d: %s", nproc_per_node, node_rank, nnodes, " ".join(command)
    )
    env = {**os.environ}
    env.setdefault(NCCL_ERROR_HANDLING, "1")  # a lost rank ends the job instead of hanging it
    env.setdefault("OMP_NUM_THREADS", str(threads_per_rank(nproc_per_node)))
    # torchrun passes these on to the ranks (it dies of SIGUSR1 otherwise: a SLURM --signal sent to
    # every process of the job). torchrun's --signals-to-handle, through the PET_ variable its
    # options read; TORCHELASTIC_ for older torchruns (a newer one overwrites it with that option).
    signals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
    env.setdefault("PET_SIGNALS_TO_HANDLE", signals)
    env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", signals)
    checkpoint_before = _newest_checkpoint(checkpoint_dir)
    received, torchrun = [], []

    def forward(signum, frame):  # as SIGTERM, which every torchrun passes on to the ranks
        received.append(signal.Signals(signum).name)
        for process in torchrun:
            process.send_signal(signal.SIGTERM)

    # Handlers first: torchrun must not inherit an ignored signal (`trap '' TERM` before dvc), and
    # a signal that comes while it starts is passed on once it runs.
    previous = {name: signal.signal(getattr(signal, name), forward) for name in PREEMPTION_SIGNALS}
    try:
        process = subprocess.Popen(command, env=env)
        torchrun.append(process)
        if received:
            process.send_signal(signal.SIGTERM)
        status = process.wait()
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)
    if received and status:
        raise UserError(f"pre-empted ({received[0]}); {_checkpoint_note(checkpoint_dir, checkpoint_before)}")
    if status:
        where = "see the rank's error above"
        if (
            nnodes > 1 and node_rank == 0
        ):  # a rendezvous timeout names no rank: the likely cause is a node that never came
            where += (
                f"; a rendezvous timeout means not all {nnodes} nodes started: on each other node run "
                f"`python -m {' '.join(module_args)} --join N` (N = 1 to {nnodes - 1}), not `dvc repro`"
            )
        if checkpoint_dir:
            where += f"; {_checkpoint_note(checkpoint_dir, checkpoint_before)}"
        raise UserError(
            f"python -m {' '.join(module_args)} failed on at least one rank (exit status {status}); {where}"
        )
    return True


def threads_per_rank(nproc_per_node: int) -> int:
    """The CPU threads of each rank (OMP_NUM_THREADS): the CPUs this node lets the run use (its
    affinity: what SLURM, taskset or a container grants), shared by its ranks. torchrun sets 1 only
    when nproc_per_node > 1, and a lone rank takes every core: 2 nodes x 1 rank would then sum
    floats in another order than 1 node x 2 ranks, and compute other weights."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // nproc_per_node)


def _newest_checkpoint(checkpoint_dir) -> tuple | None:
    """(path, modification time) of the newest checkpoint of checkpoint_dir; None when there is none."""
    from bert.checkpoints import list_checkpoints  # it imports this module

    found = list_checkpoints(checkpoint_dir)[-1:] if checkpoint_dir else []
    return (found[0], found[0].stat().st_mtime_ns) if found else None


def _checkpoint_note(checkpoint_dir, before: tuple | None) -> str:
    """What the stopped ranks left to resume from, as the disk has it now."""
    from bert.checkpoints import checkpoint_step

    newest = _newest_checkpoint(checkpoint_dir)
    if newest is None:
        return f"no checkpoint in {checkpoint_dir}: running the stage again starts afresh"
    when = "from before this run" if newest == before else "written by this run"
    return (
        f"the newest checkpoint is step {checkpoint_step(newest[0])} ({newest[0]}, {when}); "
        "run the stage again to resume"
    )
