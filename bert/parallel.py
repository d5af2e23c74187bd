"""Where the data stages' tasks run (documents@wikipedia, shard, examples): the task engine.

A stage is the driver: it lists its tasks (fixed by the input and seeded by (seed, task index),
never by the number of workers), the engine runs them, and the results come back in task order,
so an output is the same bytes on every scheduler and with any number of workers.
`Compute(scheduler, num_workers)` chooses the engine (params.yaml `compute`):
  - `local`: a process pool on this machine (one worker: this process);
  - `dask`: a Dask LocalCluster on this machine, `num_workers` single-threaded processes;
  - `tcp://host:8786`: a running Dask scheduler, whose workers may be on many machines (started
    by dask-jobqueue's SLURMCluster, dask-mpi, or `dask scheduler` / `dask worker` by hand). They
    must run this stage's environment with the project installed in it, so that they import this
    checkout's `bert` (bert.dask_environment checks before any task), and see its files at the same
    paths (a shared filesystem).
Tasks are module-level functions of plain values (paths, numbers, lists), and a worker's set-up
(`initializer(*initargs)`) reads files: nothing depends on what a forked process inherits.

A worker killed from outside (the OOM killer, kill -9): the local pool stops the stage with a
UserError naming the task, instead of waiting forever for the dead worker's result; Dask runs the
task again on another worker, and stops the stage the same way only when workers keep dying on
it. A Dask scheduler lost while the stage runs (killed, its machine gone) stops the stage with one
line naming its address. As outputs are written through bert.atomic, nothing half-made is published.
"""

import asyncio
import logging
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import count, islice

from tqdm import tqdm

from bert.compute import Compute, is_scheduler_address
from bert.dask_environment import check_cluster
from bert.errors import UserError

TASKS_AHEAD_PER_WORKER = 4  # queued tasks per worker: workers never wait, memory stays bounded
# The local pool forks (fast to start); tasks need nothing a fork inherits (tested with spawn).
START_METHOD = "fork"
CONNECT_TIMEOUT = "30s"  # to a Dask scheduler given by its address


class ComputePool:
    """The workers of one stage: `with ComputePool(compute, initializer, initargs) as workers:` then
    `workers.map(function, tasks, describe)`. `compute` may be a number of local workers. With
    one local worker the tasks run in this process. `initializer(*initargs)` runs once in each
    worker process before its first task. Leaving the `with` block on an error stops the workers
    without waiting for their tasks."""

    def __init__(self, compute: "Compute | int", initializer: Callable | None = None, initargs: tuple = ()):
        compute = Compute.of(compute)
        self.compute, self.initializer, self.initargs = compute, initializer, initargs
        self.executor = self.client = self.cluster = None
        if compute.scheduler == "local" and compute.workers > 1:
            context = multiprocessing.get_context(START_METHOD)
            self.tasks_ahead = TASKS_AHEAD_PER_WORKER * compute.workers
            # started[n % tasks_ahead] == n once a worker has begun task n: which tasks a dead
            # worker may have been running (the tasks in flight are tasks_ahead consecutive ones)
            self.started = context.Array("q", [-1] * self.tasks_ahead, lock=False)
            self.executor = ProcessPoolExecutor(
                compute.workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self.started, initializer, initargs),
            )
        elif compute.scheduler == "local":
            if initializer is not None:
                initializer(*initargs)
        else:
            self._start_dask()

    def __enter__(self) -> "ComputePool":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.client is not None:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
            return
        if self.executor is None:
            return
        if kind is not None:
            for process in list((self.executor._processes or {}).values()):  # no public way before 3.14
                process.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def map(self, function: Callable, tasks: Iterable[tuple], describe: Callable[[tuple], str]) -> Iterator:
        """function(*task) for each task, in task order. `tasks` is read lazily, a few tasks ahead
        of the workers; `describe(task)` names the task's input if a worker dies."""
        if self.client is not None:
            yield from self._map_dask(function, tasks, describe)
            return
        if self.executor is None:
            for task in tasks:
                yield function(*task)
            return
        numbered = enumerate(tasks)
        pending = deque()  # (number, task, future) in task order

        def submit(count: int) -> None:
            for number, task in islice(numbered, count):
                pending.append((number, task, self.executor.submit(_run, function, number, *task)))

        submit(self.tasks_ahead)
        while pending:
            try:
                result = pending[0][2].result()
                pending.popleft()
                submit(1)  # raises too when the pool broke since the result came
            except BrokenProcessPool:
                raise UserError(
                    f"{self._died_during(pending, describe)}: a worker process died (killed, or out of memory?); "
                    "re-run the stage"
                ) from None
            yield result

    def _died_during(self, pending: deque, describe: Callable[[tuple], str]) -> str:
        """The tasks that were running when the pool broke (the dead worker's is one of them)."""
        running = []
        for number, task, future in pending:
            wait([future])
            if self.started[number % self.tasks_ahead] == number and future.exception() is not None:
                running.append(describe(task))
        return " or ".join(running) or "a task"

    # Dask ------------------------------------------------------------------------------------

    def _start_dask(self) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError:
            raise UserError(
                f"compute.scheduler {self.compute.scheduler!r} needs Dask: pip install 'dask[distributed]'"
            ) from None
        scheduler = self.compute.scheduler
        if scheduler == "dask":
            self.cluster = LocalCluster(
                n_workers=self.compute.workers,
                threads_per_worker=1,  # tasks hold the GIL: one per process, as in the local pool
                processes=True,
                dashboard_address=None,
                silence_logs=40,  # logging.ERROR: a stage's log stays readable
            )
            self.client = Client(self.cluster)
            workers = self.compute.workers
        else:
            try:
                self.client = Client(scheduler, timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as error:
                raise UserError(
                    f"compute.scheduler {scheduler}: cannot reach the Dask scheduler ({error}); start one "
                    "(`dask scheduler`, dask-jobqueue or dask-mpi) or set compute.scheduler: local"
                ) from None
            # Processes started elsewhere may run another environment: one line now, before any task
            # (a LocalCluster's workers are this process's children, started from its environment).
            try:
                check_cluster(self.client, scheduler)
            except UserError:
                self.client.close()
                raise
            workers = max(len(self.client.scheduler_info().get("workers", {})), 1)
        self.tasks_ahead = TASKS_AHEAD_PER_WORKER * workers
        client_log = logging.getLogger("distributed.client")
        if not any(isinstance(each, _QuietLostConnection) for each in client_log.filters):
            client_log.addFilter(_QuietLostConnection())

    def _map_dask(
        self, function: Callable, tasks: Iterable[tuple], describe: Callable[[tuple], str]
    ) -> Iterator:
        from dask.distributed import KilledWorker

        numbered = enumerate(tasks)
        pending = deque()
        prefix = f"{function.__name__}-{os.getpid()}-{next(_maps)}"

        def submit(count: int) -> None:
            for number, task in islice(numbered, count):
                future = self.client.submit(
                    _run_on_dask, os.getcwd(), self.initializer, self.initargs, function, *task,
                    key=f"{prefix}-{number}", pure=False,
                )  # fmt: skip
                pending.append((task, future))

        submit(self.tasks_ahead)
        while pending:
            task, future = pending[0]
            try:
                result = future.result()
                pending.popleft()
                future.release()
                submit(1)
            except KilledWorker:
                raise UserError(
                    f"{describe(task)}: the Dask workers running it died, again on each retry (killed, or out "
                    "of memory? it, or a task beside it on the same worker); re-run the stage"
                ) from None
            except CancelledError:  # Dask cancels every future of a client whose scheduler is gone
                raise UserError(
                    f"compute.scheduler {self.compute.scheduler}: the Dask scheduler at "
                    f"{self.client.scheduler.address} was lost while {describe(task)} ran (stopped or killed, or "
                    "its machine gone?); nothing was published: start the scheduler and its workers again, or "
                    "set compute.scheduler: local, then re-run the stage"
                ) from None
            yield result


_maps = count()  # names Dask task keys apart, so two maps never share a result


class _QuietLostConnection(logging.Filter):
    """Drops the tracebacks Dask's client logs while it tries to reach a lost scheduler again: the
    stage says it in one line (ComputePool._map_dask)."""

    def filter(self, record: logging.LogRecord) -> bool:
        lost = record.exc_info and isinstance(record.exc_info[1], OSError | asyncio.CancelledError)
        return not lost


def run_tasks(
    function: Callable,
    tasks: list[tuple],
    compute: "Compute | int",
    description: str,
    describe: Callable[[tuple], str],
) -> list:
    """function(*task) for a list of tasks, with a progress bar (a step per task); the results in task order."""
    compute = Compute.of(compute)
    if not is_scheduler_address(compute.scheduler):  # no more processes than tasks
        compute = Compute(compute.scheduler, max(min(compute.workers, len(tasks)), 1))
    # The bar is closed before an error leaves (`with`), so the error stays the last line printed.
    with (
        tqdm(total=len(tasks), desc=description, unit="shard", disable=len(tasks) < 2) as bar,
        ComputePool(compute) as workers,
    ):
        results = []
        for result in workers.map(function, tasks, describe):
            results.append(result)
            bar.update()
        return results


_started = None  # in a local pool's worker: ComputePool.started


def _start_worker(started, initializer: Callable | None, initargs: tuple) -> None:
    global _started
    _started = started
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per core already
    if initializer is not None:
        initializer(*initargs)


def _run(function: Callable, number: int, *task):
    _started[number % len(_started)] = number
    return function(*task)


_set_up = None  # in a Dask worker: the (initializer, initargs) it last ran


def _run_on_dask(cwd: str, initializer: Callable | None, initargs: tuple, function: Callable, *task):
    """A task on a Dask worker, which may serve many stages in turn. It runs in the stage's
    working directory (the same path on every machine of a shared filesystem), so the relative
    paths of tasks mean what they mean to the stage; the stage's set-up runs before the first of
    its tasks on each worker process (and again after a restart)."""
    global _set_up
    os.chdir(cwd)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if initializer is not None and _set_up != (initializer, initargs):
        initializer(*initargs)
        _set_up = (initializer, initargs)
    return function(*task)
