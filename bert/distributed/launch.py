"""The processes of a training run: a stage that asks for more than one starts itself again under
torchrun (one process per GPU of every node); each of those joins torchrun's process group.
Every training stage runs through one launcher:

    launch(["stages.pretrain", phase], sys.argv[2:], usage, settings, lambda distributed: ...)

which reads `--join NODE_RANK` (a node other than the head), relaunches under torchrun when the
run asks for more than one process, joins the process group in each rank, runs the work and
leaves the group, whatever happened.

Where and how the ranks run on this allocation (rendezvous endpoint, timeout, restarts) comes from
the environment (Execution), never from params: it changes no number.

A lost rank must end the job, not hang the others: collectives time out after timeout_minutes, and
NCCL's asynchronous error handling (TORCH_NCCL_ASYNC_ERROR_HANDLING=1, unless the user set it)
turns a timeout or a failed peer into an exit that torchrun sees.
"""

import datetime
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist

from bert.distributed.torchrun import REPORT_ENV, record_rank_error
from bert.errors import UserError, first_line
from bert.training.checkpoints import checkpoint_step, newest_checkpoint
from bert.training.collectives import PREEMPTION_SIGNALS

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


class LaunchSettings(Protocol):
    """How many processes a training run has, how they talk and how many threads each computes on
    (params.yaml's `distributed`): what can change the numbers, and so part of what DVC tracks."""

    nproc_per_node: int
    nnodes: int
    backend: str  # auto | nccl | gloo
    threads_per_rank: int | str  # N, or auto: this node's CPUs over its ranks (threads_per_rank())


@dataclass(frozen=True)
class Execution:
    """Where and how this allocation runs the ranks, from the environment (docs/operations.md):
    nothing here changes what is computed, so a new allocation (another head node, port, timeout)
    changes no tracked file and reruns no stage."""

    rdzv_endpoint: str = "localhost:29500"  # BERT_RDZV_ENDPOINT: the head node's host:port (nnodes > 1)
    timeout_minutes: float = 30.0  # BERT_DIST_TIMEOUT_MINUTES: the rendezvous, and a collective's wait
    max_restarts: int = 0  # BERT_MAX_RESTARTS: torchrun restarts the ranks this often after a failure
    log_dir: Path | None = (
        None  # the run's folder under BERT_LOG_DIR: each rank's output (bert.distributed.torchrun)
    )


# A host as the nodes reach each other: a name or IPv4 address, or an IPv6 one in brackets.
HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]")
# ASCII digits only: str.isdigit() takes "²" and "١", which int() or torchrun's own parsing refuse.
PORT = re.compile(r"[0-9]{1,5}")


def execution_from_environment(
    environ=os.environ, log_dir: str | os.PathLike | None = None, outputs: Iterable[str | os.PathLike] = ()
) -> Execution:
    """The Execution that BERT_RDZV_ENDPOINT, BERT_DIST_TIMEOUT_MINUTES, BERT_MAX_RESTARTS and
    BERT_LOG_DIR ask for, each checked before any work as params are (unset or empty: its
    default): a value that does not fit is one UserError naming the variable, its value and the
    fix. `log_dir` is the run's log folder (under BERT_LOG_DIR, or the caller's default when it is
    unset): it must be a folder or creatable as one, writable, and neither inside nor holding any of
    `outputs`, the folders the pipeline replaces (DVC deletes an output before its stage runs, and
    the stage replaces it whole: logs written there vanish, or change the output's hash)."""
    default = Execution()
    endpoint = environ.get("BERT_RDZV_ENDPOINT") or default.rdzv_endpoint
    host, _, port = endpoint.rpartition(":")
    if not HOST.fullmatch(host) or not PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise UserError(
            f"BERT_RDZV_ENDPOINT={_shown(endpoint)}: expected HOST:PORT, the head node's address and a "
            "free port 1-65535 in ASCII digits (e.g. node17:29500)"
        )

    def number(name: str, kind, low: float, high: float, meaning: str):
        text = environ.get(name) or ""
        if not text:
            return None
        try:
            value = kind(text) if text.isascii() else None  # float() and int() take "١٢" too
        except ValueError:
            value = None
        if value is None or not (low < value <= high if kind is float else low <= value <= high):
            interval = f"in (0, {high:g}]" if kind is float else f"a whole number {low} to {high}"
            raise UserError(f"{name}={_shown(text)}: expected {interval} ({meaning})")
        return value

    timeout = number(
        "BERT_DIST_TIMEOUT_MINUTES", float, 0, 24 * 60, "minutes the rendezvous and a collective wait"
    )
    restarts = number("BERT_MAX_RESTARTS", int, 0, 100, "restarts of the ranks after a failure")
    if log_dir is not None:
        _check_log_dir(Path(log_dir), environ.get("BERT_LOG_DIR") or "", outputs)
    return Execution(
        endpoint,
        default.timeout_minutes if timeout is None else timeout,
        default.max_restarts if restarts is None else restarts,
        None if log_dir is None else Path(log_dir),
    )


def _check_log_dir(folder: Path, variable: str, outputs: Iterable[str | os.PathLike]) -> None:
    """A UserError unless the ranks of a run can write their logs to `folder` (under BERT_LOG_DIR,
    whose value is `variable`, "" when it is unset) and nothing of the pipeline removes them."""
    if variable:
        named, fix = f"BERT_LOG_DIR={_shown(variable)}", "point BERT_LOG_DIR at another folder"
    else:
        named, fix = f"{folder} (the ranks' logs; BERT_LOG_DIR unset)", "set BERT_LOG_DIR to another folder"
    if "\0" in str(folder):
        raise UserError(f"{named}: not a path (it holds a NUL character); {fix}")
    try:
        real = Path(os.path.realpath(folder))
        for output in outputs:
            theirs = Path(os.path.realpath(output))
            if real.is_relative_to(theirs) or theirs.is_relative_to(real):
                inside = "inside" if real.is_relative_to(theirs) else "holding"
                where = "" if real == theirs else f" ({inside} {output})"
                raise UserError(
                    f"{named}: the logs would go to {folder}{where}, among the pipeline's outputs (DVC deletes "
                    f"an output before its stage runs, and the stage replaces it whole); {fix}, outside them"
                )
        nearest = folder  # the folder, or its nearest ancestor that exists: where it would be created
        while not os.path.lexists(nearest) and nearest != nearest.parent:
            nearest = nearest.parent
        if not nearest.is_dir():
            raise UserError(f"{named}: {nearest} is a file, not a folder; {fix} (it is created when missing)")
        created = folder.relative_to(nearest).parts
        longest = max((len(os.fsencode(part)) for part in created), default=0)
        name_max, path_max = os.pathconf(nearest, "PC_NAME_MAX"), os.pathconf(nearest, "PC_PATH_MAX")
        if longest > name_max or len(os.fsencode(real)) >= path_max:
            raise UserError(f"{named}: a name too long for the file system; {fix}")
        if not os.access(nearest, os.W_OK):
            read_only = os.statvfs(nearest).f_flag & os.ST_RDONLY
            why = "on a read-only file system" if read_only else "not writable for you"
            raise UserError(f"{named}: {nearest} is {why}; {fix}, a writable one")
    except (OSError, ValueError) as error:  # a loop of links, a name the system refuses
        raise UserError(f"{named}: cannot hold the logs ({first_line(error)}); {fix}") from None


def _shown(value: str) -> str:
    """An environment variable's value for a one-line message: as it is when printable, else
    escaped (a newline would break the line), cut when long."""
    text = value if value.isprintable() else repr(value)
    return text if len(text) <= 100 else f"{text[:80]}... ({len(value)} characters)"


def launch(
    module_args: list[str],
    join_args: list[str],
    usage: str,
    settings: LaunchSettings,
    work: Callable[[Distributed], None],
    *,
    checkpoint_dir: str | os.PathLike,
    log_dir: str | os.PathLike,
    outputs: Iterable[str | os.PathLike] = (),
) -> None:
    """Run a training stage: `python -m <module_args> [--join NODE_RANK]` (join_args: what follows
    the module's own arguments on its command line). First, before any work, check the execution
    settings of the environment (execution_from_environment: log_dir may not overlap `outputs`).
    In the process that is the run's (alone, or a rank under torchrun), call work(distributed)
    between joining and leaving the process group, on settings.threads_per_rank threads; otherwise
    start torchrun on this node, each rank's output in log_dir, and return once every rank has
    finished (a failure is one line naming the rank, its host, its signal or error and its log; a
    pre-empted run's names the newest checkpoint in `checkpoint_dir` actually on disk)."""
    execution = execution_from_environment(os.environ, log_dir, outputs)
    node_rank = node_rank_to_join(join_args, settings.nnodes, usage)
    if node_rank is None:
        raise UserError(f"usage: {usage}")
    if relaunch_under_torchrun(
        module_args,
        settings.nproc_per_node,
        settings.nnodes,
        execution,
        node_rank,
        checkpoint_dir=checkpoint_dir,
        log_dir=execution.log_dir,
        threads=settings.threads_per_rank,
    ):
        return
    if settings.threads_per_rank != "auto":  # also under a torchrun of the user's own, which sets 1
        torch.set_num_threads(settings.threads_per_rank)
    distributed = setup_distributed(settings.backend, execution.timeout_minutes)
    try:
        work(distributed)
    except BaseException as error:
        if distributed.world_size > 1 and not isinstance(error, (KeyboardInterrupt, SystemExit)):
            record_rank_error(error)  # torchrun's report of this rank names it
        raise
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
    """init_process_group's store when torchrun restarted the ranks (BERT_MAX_RESTARTS):
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


def torchrun_command(
    module_args: list[str],
    nproc_per_node: int,
    nnodes: int,
    execution: Execution,
    log_dir: str | os.PathLike,
    node_rank: int = 0,
) -> list[str]:
    """The command that starts `python -m <module_args>` on the GPUs of node `node_rank`: torchrun
    (bert.distributed.torchrun: each rank's output in log_dir, a failure reported, not traced back). torchrun
    restarts the ranks up to max_restarts times when one fails (each restart resumes from the
    newest checkpoint). One node needs no endpoint (--standalone: a free port of its own, so two
    runs on one machine never collide); on many nodes the rendezvous is static (rdzv_endpoint is
    node 0's address), so that global rank 0, which writes every output, runs on node 0: the node
    whose `dvc repro` records them."""
    if nnodes == 1:
        rendezvous = ["--standalone"]
    else:
        host, _, port = execution.rdzv_endpoint.rpartition(":")
        seconds = max(1, round(execution.timeout_minutes * 60))
        rendezvous = ["--node-rank", str(node_rank), "--master-addr", host, "--master-port", port,
                      "--rdzv-conf", f"timeout={seconds}"]  # fmt: skip
    return [
        sys.executable, "-m", "bert.distributed.torchrun",
        "--nproc-per-node", str(nproc_per_node),
        "--nnodes", str(nnodes),
        *rendezvous,
        "--max-restarts", str(execution.max_restarts),
        "--log-dir", str(log_dir),
        "-m", *module_args,
    ]  # fmt: skip


def node_rank_to_join(join_args: list[str], nnodes: int, usage: str) -> int | None:
    """The node rank that `--join NODE_RANK` asks for (1 .. nnodes - 1: node 0 is the head, whose
    stage runs under `dvc repro`); 0 without arguments; None for anything else (print `usage`)."""
    if not join_args:
        return 0
    number = join_args[1] if len(join_args) == 2 else ""
    if join_args[0] != "--join" or not (
        number.isascii() and number.isdigit()
    ):  # not "²", which int() refuses
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
    execution: Execution,
    node_rank: int = 0,
    checkpoint_dir: str | os.PathLike | None = None,
    log_dir: str | os.PathLike = "logs",
    threads: int | str = "auto",
) -> bool:
    """When the run asks for more than one process and this process is not one of torchrun's
    yet: wait until every node has come (many nodes), run `python -m <module_args>` again under
    torchrun and return True once every rank has finished (UserError when one failed: torchrun
    stops the others, and the line names the first that failed). False when this process is the
    run's (alone, or a rank) and should do the work. A pre-emption signal sent to this process
    goes on to torchrun, which passes it to the ranks; the error that follows names the newest
    checkpoint of checkpoint_dir (the stage's) on disk. Each rank computes on `threads` threads
    (OMP_NUM_THREADS): N (distributed.threads_per_rank), or auto: OMP_NUM_THREADS when the user
    set it, else threads_per_rank()."""
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ
    if nproc_per_node * nnodes == 1 or under_torchrun:
        return False
    if nnodes > 1:
        wait_for_nodes(execution, nnodes, node_rank, f"python -m {' '.join(module_args)}")
    command = torchrun_command(module_args, nproc_per_node, nnodes, execution, log_dir, node_rank)
    log.info(
        "launching %d processes on node %d of %d (each rank's output in %s/): %s",
        nproc_per_node, node_rank, nnodes, log_dir, " ".join(command),
    )  # fmt: skip
    descriptor, report = tempfile.mkstemp(prefix="torchrun-", suffix=".json")
    os.close(descriptor)
    checkpoint_before = _newest_checkpoint(checkpoint_dir)
    try:
        status, received = _run_passing_signals_on(
            command, _torchrun_environment(report, nproc_per_node, threads)
        )
        facts = _read_report(report)
    finally:
        Path(report).unlink(missing_ok=True)
    if received:
        preempted_by = received[0]
    elif facts and facts.get("torchrun_signal") in PREEMPTION_SIGNALS:  # torchrun alone got it
        preempted_by = f"{facts['torchrun_signal']} to torchrun on {facts['host']}"
    else:
        preempted_by = None
    if status and preempted_by:
        raise UserError(f"pre-empted ({preempted_by}); {_checkpoint_note(checkpoint_dir, checkpoint_before)}")
    if status:
        line = f"python -m {' '.join(module_args)} failed: {failure_line(facts, status, log_dir)}"
        if nnodes > 1:
            line += f"; the ranks of every node log to {log_dir} on the node"
        if checkpoint_dir:
            line += f"; {_checkpoint_note(checkpoint_dir, checkpoint_before)}"
        raise UserError(line)
    return True


def _torchrun_environment(report: str, nproc_per_node: int, threads: int | str) -> dict[str, str]:
    """This process's environment and what torchrun and its ranks need besides: where torchrun
    reports a failure, NCCL's error handling, the ranks' threads, the signals passed on."""
    env = {**os.environ, REPORT_ENV: report}
    env.setdefault(NCCL_ERROR_HANDLING, "1")  # a lost rank ends the job instead of hanging it
    if threads == "auto":  # today's rule, and a thread count the user set is theirs
        env.setdefault("OMP_NUM_THREADS", str(threads_per_rank(nproc_per_node)))
    else:  # the param: what dvc.lock records is what the ranks compute with
        env["OMP_NUM_THREADS"] = str(threads)
    # torchrun passes these on to the ranks (it dies of SIGUSR1 otherwise: a SLURM --signal sent to
    # every process of the job). torchrun's --signals-to-handle, through the PET_ variable its
    # options read; TORCHELASTIC_ for older torchruns (a newer one overwrites it with that option).
    signals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
    env.setdefault("PET_SIGNALS_TO_HANDLE", signals)
    env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", signals)
    return env


def _run_passing_signals_on(command: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run torchrun to its end, passing each pre-emption signal this process gets on to it; its
    exit status and the names of the signals received."""
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
        return process.wait(), received
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)


def _read_report(report: str) -> dict | None:
    """What bert.distributed.torchrun wrote about the run; None when it wrote nothing readable."""
    try:
        return json.loads(Path(report).read_text() or "null")
    except (OSError, ValueError):
        return None


def failure_line(facts: dict | None, status: int, log_dir: str | os.PathLike) -> str:
    """What bert.distributed.torchrun reported about a failed run (its JSON, None when it left none), as words:
    the first rank that failed, its host, its signal or error, its log; else what stopped torchrun."""
    if not facts:
        return f"torchrun exited with status {status} (its log and the ranks': {log_dir})"
    host = facts["host"]
    if "rank" in facts:
        if facts.get("signal"):
            why = f"died of {facts['signal']}"
        elif facts.get("message"):
            why = f"failed: {facts['message']}"
        else:
            why = f"exited with status {facts['exitcode']}"
        line = f"rank {facts['rank']} on {host} (node {facts['node_rank']}, pid {facts['pid']}) {why}; its output: {facts['log']}"
        others = [rank for rank in facts.get("failed_ranks", []) if rank != facts["rank"]]
        if others:
            named = ", ".join(map(str, others))
            line += f" (then rank{'s' if len(others) > 1 else ''} {named} on this node, logs beside it)"
        return line
    if "torchrun_signal" in facts:
        return f"torchrun on {host} was stopped by {facts['torchrun_signal']} (the ranks' output: {log_dir})"
    return f"torchrun on {host} failed: {facts['error']} (its log: {log_dir}/torchrun-node{facts['node_rank']}.log)"


# How often a node waiting at the rendezvous says who has come.
REPORT_EVERY_SECONDS = 30.0


def wait_for_nodes(execution: Execution, nnodes: int, node_rank: int, command: str) -> None:
    """Before torchrun, on every node of a many-node run: meet the other nodes at rdzv_endpoint
    (node 0 listens there), saying every REPORT_EVERY_SECONDS who has joined; return once all
    nnodes have, then free the port for torchrun's own rendezvous. After timeout_minutes, one line
    with the fix: on the head, which nodes are missing and their command (`command --join N`); on a
    joining node that found no head, that the head runs `dvc repro`, and where it looked."""
    endpoint = execution.rdzv_endpoint
    host, _, port = endpoint.rpartition(":")
    minutes = f"{execution.timeout_minutes:g} minutes (BERT_DIST_TIMEOUT_MINUTES)"
    deadline = time.monotonic() + execution.timeout_minutes * 60
    if node_rank == 0:
        try:
            store = dist.TCPStore(host, int(port), is_master=True, wait_for_workers=False,
                                  timeout=datetime.timedelta(minutes=execution.timeout_minutes))  # fmt: skip
        except dist.DistError as error:
            raise UserError(
                f"BERT_RDZV_ENDPOINT={endpoint}: this node (the head) cannot listen on port {port} "
                f"({first_line(error)}); another run may hold it: choose another port"
            ) from None
    else:
        store = _connect_to_head(host, int(port), deadline, endpoint, minutes)
    try:
        store.set(f"node/{node_rank}", socket.gethostname())
        next_report = time.monotonic() + REPORT_EVERY_SECONDS
        while True:
            joined = {n: store.get(f"node/{n}").decode() for n in range(nnodes) if store.check([f"node/{n}"])}
            missing = [n for n in range(nnodes) if n not in joined]
            status = f"rendezvous at {endpoint}: {len(joined)} of {nnodes} nodes joined ({_nodes(joined)})"
            if not missing:
                break
            if time.monotonic() > deadline:
                raise UserError(
                    f"{status}; node{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not "
                    f"join within {minutes}: on each of them run `{command} --join N` (N its node rank) with "
                    f"BERT_RDZV_ENDPOINT={endpoint}, and `dvc repro` on the head only"
                )
            if time.monotonic() >= next_report:
                log.info("%s; waiting for node %s", status, ", ".join(map(str, missing)))
                next_report += REPORT_EVERY_SECONDS
            time.sleep(0.1)
        log.info(status)
        if node_rank == 0:  # keep listening until every node has seen the list (or given up on it)
            while store.add("seen", 0) < nnodes - 1 and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            store.add("seen", 1)
    except dist.DistError as error:
        raise UserError(f"rendezvous at {endpoint}: lost the head node ({first_line(error)})") from None
    finally:
        del store


def _connect_to_head(host: str, port: int, deadline: float, endpoint: str, minutes: str):
    """A joining node's connection to the head's rendezvous, tried until the deadline."""
    while True:
        left = deadline - time.monotonic()
        try:
            attempt = datetime.timedelta(seconds=max(1.0, min(REPORT_EVERY_SECONDS, left)))
            return dist.TCPStore(host, port, is_master=False, wait_for_workers=False, timeout=attempt)
        except dist.DistError:
            if time.monotonic() >= deadline:
                raise UserError(
                    f"rendezvous at {endpoint}: no head node answered within {minutes}: the head node "
                    "(node 0) must run the stage, with `dvc repro`, and this node joins it; check that "
                    "BERT_RDZV_ENDPOINT is the head's address and a port it can open"
                ) from None
            log.info("rendezvous at %s: waiting for the head node (it runs `dvc repro`)", endpoint)


def _nodes(joined: dict[int, str]) -> str:
    return ", ".join(f"node {n} on {host}" for n, host in sorted(joined.items()))


def threads_per_rank(nproc_per_node: int) -> int:
    """The CPU threads of each rank under `distributed.threads_per_rank: auto` (OMP_NUM_THREADS):
    the CPUs this node lets the run use (its affinity: what SLURM, taskset or a container grants),
    shared by its ranks. torchrun sets 1 only when nproc_per_node > 1, and a lone rank takes every
    core: 2 nodes x 1 rank would then sum floats in another order than 1 node x 2 ranks, and
    compute other weights. Nodes with other CPU counts still differ, which is why a fixed count
    (threads_per_rank: N) is the param for runs that must be equal on any layout."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cpus // nproc_per_node)


def _newest_checkpoint(checkpoint_dir) -> tuple | None:
    """(path, modification time) of the newest checkpoint of checkpoint_dir; None when there is none."""
    newest = newest_checkpoint(checkpoint_dir)
    return (newest, newest.stat().st_mtime_ns) if newest else None


def _checkpoint_note(checkpoint_dir, before: tuple | None) -> str:
    """What the stopped ranks left to resume from, as the disk has it now."""
    newest = _newest_checkpoint(checkpoint_dir)
    if newest is None:
        return f"no checkpoint in {checkpoint_dir}: running the stage again starts afresh"
    when = "from before this run" if newest == before else "written by this run"
    return (
        f"the newest checkpoint is step {checkpoint_step(newest[0])} ({newest[0]}, {when}); "
        "run the stage again to resume"
    )
