import os
import random
import signal
import time
from pathlib import Path

import pytest

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.errors import UserError
from bert.parallel import ComputePool, run_tasks


def square_slowly(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value * value


def die_on_three(value: int) -> int:
    if value == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does
    time.sleep(0.05)
    return value


def fail_on_two(value: int) -> int:
    if value == 2:
        raise UserError(f"input {value}: bad")
    return value


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_results_come_in_task_order_whatever_finishes_first(num_workers):
    tasks = [(value, 0.2 if value % 3 == 0 else 0.0) for value in range(10)]
    with ComputePool(num_workers) as workers:
        assert list(workers.map(square_slowly, tasks, describe=str)) == [value * value for value in range(10)]


def test_tasks_are_read_lazily_a_few_ahead_of_the_workers():
    read = []

    def tasks():
        for value in range(1000):
            read.append(value)
            yield (value, 0.0)

    with ComputePool(2) as workers:
        results = workers.map(square_slowly, tasks(), describe=str)
        assert next(results) == 0
        assert len(read) < 20


def test_a_killed_worker_is_a_user_error_naming_the_task_not_a_hang(tmp_path):
    start = time.monotonic()
    with pytest.raises(UserError) as caught, atomic_folder(tmp_path / "out") as building:
        (building / "part").write_text("half-made")
        run_tasks(die_on_three, [(value,) for value in range(8)], 2, "test", lambda task: f"input {task[0]}")
    assert time.monotonic() - start < 30
    message = str(caught.value)
    # the task of the dead worker, and those whose futures the broken pool failed beside it: the one
    # running on the other worker, and under load one that had finished but whose result was not read
    named = message.split(": a worker")[0].split(" or ")
    assert "input 3" in named and set(named) <= {"input 2", "input 3", "input 4"}, message
    assert "a worker process died (killed, or out of memory?)" in message
    assert "re-run the stage" in message
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []  # nothing published


def die_on_one_slowly(value: int) -> int:
    if value == 1:
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def test_a_worker_that_dies_while_the_next_task_is_read_is_a_user_error_too():
    """The pool breaks between a task's result and the submission of the next (reading it takes a
    second): that submission fails, and says so as a result would."""

    def tasks():
        for value in range(20):
            if value == 8:  # read after task 0's result, while task 1 kills its worker
                time.sleep(1)
            yield (value,)

    with pytest.raises(UserError, match="^input 1.*: a worker process died"), ComputePool(2) as workers:
        list(workers.map(die_on_one_slowly, tasks(), describe=lambda task: f"input {task[0]}"))


def test_an_error_in_a_task_reaches_the_caller_and_stops_the_workers():
    with pytest.raises(UserError, match="input 2: bad"), ComputePool(2) as workers:
        list(workers.map(fail_on_two, [(value,) for value in range(6)], describe=str))


# ---------------------------------------------------------------------------------------------
# The same tasks on every engine: the local pool, a Dask LocalCluster, a Dask scheduler's address


def square_at_random_speed(value: int) -> int:
    time.sleep(random.Random(value).uniform(0, 0.05))  # tasks finish out of order
    return value * value


def die_once(value: int, marker_dir: str) -> int:
    """Kills its worker the first time it runs task 3, as the OOM killer would; fine the second."""
    marker = Path(marker_dir) / f"died-{value}"
    if value == 3 and not marker.exists():
        marker.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def always_die_on_three(value: int) -> int:
    if value == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def relative_file_size(value: int, name: str) -> int:
    """Tasks read paths relative to the stage's working directory, on any worker."""
    return Path(name).stat().st_size + value


ENGINES = [Compute("local", 1), Compute("local", 2), Compute("dask", 2)]


@pytest.mark.parametrize("compute", ENGINES, ids=lambda c: f"{c.scheduler}-{c.num_workers}")
def test_every_engine_gives_the_results_in_task_order(compute):
    tasks = [(value,) for value in range(24)]
    assert run_tasks(square_at_random_speed, tasks, compute, "test", str) == [v * v for v in range(24)]


def test_a_dask_worker_killed_once_has_its_task_run_again(tmp_path):
    with ComputePool(Compute("dask", 2)) as workers:
        results = list(workers.map(die_once, [(value, str(tmp_path)) for value in range(6)], describe=str))
    assert results == list(range(6)) and (tmp_path / "died-3").exists()


def test_a_task_that_kills_every_dask_worker_is_one_line_naming_it():
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        start = time.monotonic()
        with pytest.raises(UserError) as caught, ComputePool(Compute("dask", 2)) as workers:
            list(
                workers.map(always_die_on_three, [(value,) for value in range(6)], lambda t: f"input {t[0]}")
            )
    # Dask counts a death against every task the worker held: the killer, or one queued beside it
    task, message = str(caught.value).split(": ", 1)
    assert task in {f"input {number}" for number in range(6)}
    assert message == (
        "the Dask workers running it died, again on each retry (killed, or out of memory? it, or a task "
        "beside it on the same worker); re-run the stage"
    )
    assert time.monotonic() - start < 60


def test_a_user_error_in_a_dask_task_reaches_the_stage_as_it_is():
    with pytest.raises(UserError, match="^input 2: bad$"), ComputePool(Compute("dask", 2)) as workers:
        list(workers.map(fail_on_two, [(value,) for value in range(6)], describe=str))


def test_a_scheduler_address_runs_the_tasks_in_the_stages_folder(tmp_path, monkeypatch):
    from dask.distributed import LocalCluster

    (tmp_path / "input.txt").write_text("12345")
    monkeypatch.chdir(tmp_path)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=40) as cluster:
        compute = Compute(cluster.scheduler_address, 0)
        assert run_tasks(relative_file_size, [(v, "input.txt") for v in range(4)], compute, "t", str) == [
            5, 6, 7, 8,
        ]  # fmt: skip


def test_an_unreachable_scheduler_is_one_line_naming_it(monkeypatch):
    monkeypatch.setattr("bert.parallel.CONNECT_TIMEOUT", "1s")
    with pytest.raises(UserError) as caught:
        ComputePool(Compute("tcp://127.0.0.1:9", 0))
    message = str(caught.value)
    assert message.startswith("compute.scheduler tcp://127.0.0.1:9: cannot reach the Dask scheduler")
    assert message.endswith(
        "start one (`dask scheduler`, dask-jobqueue or dask-mpi) or set compute.scheduler: local"
    )


def test_the_local_pool_needs_nothing_a_fork_inherits(monkeypatch):
    monkeypatch.setattr("bert.parallel.START_METHOD", "spawn")
    tasks = [(value,) for value in range(12)]
    assert run_tasks(square_at_random_speed, tasks, 2, "test", str) == [v * v for v in range(12)]
