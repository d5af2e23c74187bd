import os
import signal
import time

import pytest

from bert.atomic import atomic_folder
from bert.errors import UserError
from bert.parallel import Workers, run_tasks


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
    with Workers(num_workers) as workers:
        assert list(workers.map(square_slowly, tasks, describe=str)) == [value * value for value in range(10)]


def test_tasks_are_read_lazily_a_few_ahead_of_the_workers():
    read = []

    def tasks():
        for value in range(1000):
            read.append(value)
            yield (value, 0.0)

    with Workers(2) as workers:
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
    # the task of the dead worker, or it and the one running beside it
    assert message.split(": a worker")[0] in ("input 3", "input 2 or input 3", "input 3 or input 4")
    assert "a worker process died (killed, or out of memory?)" in message
    assert "re-run the stage" in message
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []  # nothing published


def test_an_error_in_a_task_reaches_the_caller_and_stops_the_workers():
    with pytest.raises(UserError, match="input 2: bad"), Workers(2) as workers:
        list(workers.map(fail_on_two, [(value,) for value in range(6)], describe=str))
