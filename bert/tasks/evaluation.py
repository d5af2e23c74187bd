"""Each task's official measures, in percent as the papers and the GLUE leaderboard report them:
accuracy (SWAG, SST-2, QNLI, RTE, MNLI matched and mismatched), F1 of the positive class and
accuracy (MRPC, QQP), Matthews correlation (CoLA), Pearson and Spearman correlation (STS-B)."""

import logging
import math

import numpy as np

from bert.tasks import metrics
from bert.tasks.catalogue import Task

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


def over_seeds(per_seed: dict[int, dict[str, float]]) -> dict:
    """A task's figures over several fine-tuning seeds, as encoder papers report them: each
    measure's median over the seeds (under its own name, so the GLUE score reads it as it reads
    one run's), the spread of each (max − min, in points), and every seed's figures."""
    names = list(next(iter(per_seed.values())))
    values = {name: [figures[name] for figures in per_seed.values()] for name in names}
    return {
        **{name: float(np.median(column)) for name, column in values.items()},
        "spread": {name: float(max(column) - min(column)) for name, column in values.items()},
        "seeds": {str(seed): figures for seed, figures in per_seed.items()},
    }


def glue_over_seeds(figures: dict[str, dict], names: dict[str, list[str]]) -> dict:
    """The GLUE score's spread over fine-tuning seeds: the score of each seed position (the i-th
    seed of every task with several; a task with fewer, or one run, counts its median figures),
    their spread (max − min) and each task's spread of its score. `figures`: metrics/tasks/<task>.json
    of each GLUE task; `names`: each task's measures (measure_names). Empty when no task has seeds."""
    runs = {task: list(entry["seeds"].values()) for task, entry in figures.items() if "seeds" in entry}
    if not runs:
        return {}
    positions = max(len(seeds) for seeds in runs.values())
    scores = []
    for position in range(positions):
        measures = {}
        for task, entry in figures.items():
            seeds = runs.get(task, [])
            chosen = seeds[position] if position < len(seeds) else entry
            measures[task] = {name: chosen[name] for name in names[task]}
        scores.append(metrics.glue_score(measures))
    task_spread = {
        task: float(np.ptp([np.mean([run[name] for name in names[task]]) for run in seeds]))
        for task, seeds in runs.items()
    }
    return {
        "glue_score_by_seed": scores,
        "glue_score_spread": float(max(scores) - min(scores)),
        "task_score_spread": task_spread,
    }
