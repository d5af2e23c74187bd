"""Worker processes for the data stages (extract_wikipedia, shard, examples): tasks run on a pool
of processes and their results come back in task order, so an output is the same bytes whatever
the number of workers.

A worker killed from outside (the OOM killer, kill -9) breaks the pool: the stage stops with a
UserError naming the task instead of waiting forever for the dead worker's result, and as its
outputs are written through bert.atomic, nothing half-made is published.
"""

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import islice

from tqdm import tqdm

from bert.errors import UserError

TASKS_AHEAD_PER_WORKER = 4  # queued tasks per worker: workers never wait, memory stays bounded


class Workers:
    """`num_workers` processes, forked at the first task (so they share what the parent has set
    up by then), or with one worker, this process. `initializer(*initargs)` runs once in each.
    Leaving the `with` block on an error stops the workers without waiting for their tasks."""

    def __init__(self, num_workers: int, initializer: Callable | None = None, initargs: tuple = ()):
        self.executor = None
        if num_workers > 1:
            context = multiprocessing.get_context("fork")
            self.tasks_ahead = TASKS_AHEAD_PER_WORKER * num_workers
            # started[n % tasks_ahead] == n once a worker has begun task n: which tasks a dead
            # worker may have been running (the tasks in flight are tasks_ahead consecutive ones)
            self.started = context.Array("q", [-1] * self.tasks_ahead, lock=False)
            self.executor = ProcessPoolExecutor(
                num_workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self.started, initializer, initargs),
            )
        elif initializer is not None:
            initializer(*initargs)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.executor is None:
            return
        if kind is not None:
            for process in list((self.executor._processes or {}).values()):  # no public way before 3.14
                process.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def map(self, function: Callable, tasks: Iterable[tuple], describe: Callable[[tuple], str]) -> Iterator:
        """function(*task) for each task, in task order. `tasks` is read lazily, a few tasks ahead
        of the workers; `describe(task)` names the task's input if a worker dies."""
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
            except BrokenProcessPool:
                raise UserError(
                    f"{self._died_during(pending, describe)}: a worker process died (killed, or out of memory?); "
                    "re-run the stage"
                ) from None
            pending.popleft()
            submit(1)
            yield result

    def _died_during(self, pending: deque, describe: Callable[[tuple], str]) -> str:
        """The tasks that were running when the pool broke (the dead worker's is one of them)."""
        running = []
        for number, task, future in pending:
            wait([future])
            if self.started[number % self.tasks_ahead] == number and future.exception() is not None:
                running.append(describe(task))
        return " or ".join(running) or "a task"


def run_tasks(
    function: Callable,
    tasks: list[tuple],
    num_workers: int,
    description: str,
    describe: Callable[[tuple], str],
) -> list:
    """function(*task) for a list of tasks, with a progress bar (a step per task); the results in task order."""
    # The bar is closed before an error leaves (`with`), so the error stays the last line printed.
    with (
        tqdm(total=len(tasks), desc=description, unit="shard", disable=len(tasks) < 2) as bar,
        Workers(min(num_workers, len(tasks))) as workers,
    ):
        results = []
        for result in workers.map(function, tasks, describe):
            results.append(result)
            bar.update()
        return results


_started = None  # in a worker: Workers.started


def _start_worker(started, initializer: Callable | None, initargs: tuple) -> None:
    global _started
    _started = started
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one process per core already
    if initializer is not None:
        initializer(*initargs)


def _run(function: Callable, number: int, *task):
    _started[number % len(_started)] = number
    return function(*task)
