"""Each task's official measures, in percent as the papers and the GLUE leaderboard report them:
accuracy (SWAG, SST-2, QNLI, RTE, MNLI matched and mismatched), F1 of the positive class and
accuracy (MRPC, QQP), Matthews correlation (CoLA), Pearson and Spearman correlation (STS-B)."""

import logging
import math

import numpy as np

from bert.tasks import metrics
from bert.tasks.data import Task

log = logging.getLogger(__name__)

MEASURES = {
    "accuracy": metrics.accuracy,
    "f1": metrics.f1,
    "matthews_corrcoef": metrics.matthews_corrcoef,
    "pearson": metrics.pearson,
    "spearman": metrics.spearman,
}


def split_metrics(task: Task, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's measures of one split. A correlation is undefined when every prediction is the
    same score (a model that has not learned yet): it counts 0, as sklearn's Matthews correlation
    does, so the GLUE score stays a number."""
    figures = {}
    for name in task.metrics:
        value = float(MEASURES[name](predictions, labels))
        if not math.isfinite(value):
            log.warning(
                "%s: %s is undefined (every prediction is %s); counted 0", task.title, name, predictions[0]
            )
            value = 0.0
        figures[name] = 100 * value
    return figures


def task_metrics(task: Task, scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """One task's figures from its dev splits' measures, named as `measure_names` says."""
    return {
        f"{name}{_split_suffix(split)}": value
        for split, measures in scores.items()
        for name, value in measures.items()
    }


def measure_names(task: Task) -> list[str]:
    """The names of a task's figures: its measures (`accuracy`, `f1`, ...) for a task of one dev
    split, each with its split's name for MNLI (`accuracy_matched`, `accuracy_mismatched`)."""
    return [f"{name}{_split_suffix(split)}" for split in task.dev_splits for name in task.metrics]


def _split_suffix(split: str) -> str:
    return "" if split == "dev" else "_" + split.removeprefix("dev_")
