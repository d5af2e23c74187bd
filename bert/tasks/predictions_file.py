"""The predictions file of a split: a TSV with the columns of GLUE's submission files (`index`,
`prediction`: the label as the task writes it, or the score) and the example's `line` in the dev
file, so that evaluation checks it scores that file."""

from pathlib import Path

import numpy as np

from bert.errors import UserError
from bert.tasks.catalogue import Task

PREDICTION_HEADER = ("index", "line", "prediction")


def write_predictions(path: Path, task: Task, predictions: np.ndarray, lines: list[int]) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write("\t".join(PREDICTION_HEADER) + "\n")
        for index, (line, value) in enumerate(zip(lines, predictions)):
            file.write(f"{index}\t{line}\t{_written(task, value)}\n")


def _written(task: Task, value) -> str:
    if task.kind == "regression":
        return f"{float(value):.9g}"  # every digit of a float32
    return task.labels[int(value)]


def read_predictions(path: Path, task: Task, lines: list[int]) -> np.ndarray:
    """The predictions of `path` for the examples at `lines` of the dev file, as labels' indices or
    scores; a file written for another dev file (other lines, other count) is one clear line."""
    if not path.is_file():
        raise UserError(f"{path}: not found; run `dvc repro predict_task@{task.name}`")
    rows = [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
    if not rows or tuple(rows[0]) != PREDICTION_HEADER:
        raise UserError(f"{path}: not a predictions file (its header is not {' '.join(PREDICTION_HEADER)})")
    rows = rows[1:]
    if [int(row[1]) for row in rows] != lines:
        raise UserError(
            f"{path}: {len(rows)} predictions for other lines than the {len(lines)} examples of the dev file; "
            f"re-run `dvc repro predict_task@{task.name}`"
        )
    values = [row[2] for row in rows]
    if task.kind == "regression":
        return np.array([float(value) for value in values], np.float64)
    unknown = [value for value in values if value not in task.labels]
    if unknown:
        raise UserError(f"{path}: prediction {unknown[0]!r} is not one of {task.title}'s labels")
    return np.array([task.labels.index(value) for value in values], np.int64)
