"""The metrics of SWAG and GLUE, in numpy alone, equal to scikit-learn's and scipy's (tested).

Each takes predictions and references as two 1-D sequences of the same, non-zero length and
returns a float: a fraction or a correlation, not a percentage (the caller multiplies by 100).

| task | metrics (GLUE's) |
| --- | --- |
| CoLA | Matthews correlation |
| SST-2, QNLI, RTE, SWAG | accuracy |
| MRPC, QQP | F1 (positive class 1: paraphrase / duplicate) and accuracy |
| STS-B | Pearson and Spearman correlation (a regression on 0..5) |
| MNLI | accuracy on the matched and on the mismatched dev set |
"""

import numpy as np

from bert.tasks.catalogue import GLUE_TASKS  # as the BERT paper scores GLUE


def _pair(predictions, references) -> tuple[np.ndarray, np.ndarray]:
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.ndim != 1 or predictions.shape != references.shape or not len(predictions):
        raise ValueError(
            f"expected two 1-D sequences of the same non-zero length, got shapes "
            f"{predictions.shape} and {references.shape}"
        )
    return predictions, references


def accuracy(predictions, labels) -> float:
    """The share of predictions equal to their label."""
    predictions, labels = _pair(predictions, labels)
    return float(np.mean(predictions == labels))


def _confusion(predictions, labels) -> tuple[float, float, float, float]:
    """Binary counts, class 1 positive: true positives, false positives, false negatives, true
    negatives, as floats (their products overflow no integer type)."""
    predictions, labels = _pair(predictions, labels)
    predicted, actual = predictions == 1, labels == 1
    return (
        float(np.sum(predicted & actual)),
        float(np.sum(predicted & ~actual)),
        float(np.sum(~predicted & actual)),
        float(np.sum(~predicted & ~actual)),
    )


def f1(predictions, labels) -> float:
    """Binary F1 of class 1, 2·TP / (2·TP + FP + FN): the harmonic mean of precision and recall.
    0 when there is no positive at all, predicted or true (scikit-learn's zero_division=0)."""
    tp, fp, fn, _ = _confusion(predictions, labels)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def matthews_corrcoef(predictions, labels) -> float:
    """Binary Matthews correlation, (TP·TN − FP·FN) / sqrt of the four margins' product, in
    [-1, 1]. 0 when it is undefined (all predictions, or all labels, of one class), as in
    scikit-learn."""
    tp, fp, fn, tn = _confusion(predictions, labels)
    margins = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return float((tp * tn - fp * fn) / np.sqrt(margins)) if margins else 0.0


def pearson(predictions, references) -> float:
    """Pearson's correlation coefficient. NaN when either side is constant (it is undefined), as
    in scipy.stats.pearsonr."""
    x, y = (np.asarray(side, dtype=np.float64) for side in _pair(predictions, references))
    if np.all(x == x[0]) or np.all(y == y[0]):  # not a zero norm: a mean's rounding leaves ~1e-17
        return float("nan")
    x, y = x - x.mean(), y - y.mean()
    # Each side scaled to unit norm before the dot product, as scipy does, for accuracy.
    return float(np.clip(np.dot(x / np.linalg.norm(x), y / np.linalg.norm(y)), -1.0, 1.0))


def average_ranks(values) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their ranks (scipy.stats.rankdata's default)."""
    values = np.asarray(values)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_run = np.r_[True, ordered[1:] != ordered[:-1]]
    run_starts = np.flatnonzero(starts_run)
    run_ends = np.r_[run_starts[1:], len(values)]
    run_ranks = (run_starts + 1 + run_ends) / 2  # the mean of ranks start + 1 .. end
    ranks = np.empty(len(values))
    ranks[order] = run_ranks[np.cumsum(starts_run) - 1]
    return ranks


def spearman(predictions, references) -> float:
    """Spearman's rank correlation: Pearson's on the average ranks. NaN when either side is
    constant, as in scipy.stats.spearmanr."""
    predictions, references = _pair(predictions, references)
    return pearson(average_ranks(predictions), average_ranks(references))


def glue_score(task_scores: dict[str, dict[str, float]]) -> float:
    """The GLUE leaderboard's macro average over the tasks given: a task's score is the
    unweighted mean of its metrics (MRPC and QQP: F1 and accuracy; STS-B: Pearson and Spearman;
    MNLI: matched and mismatched accuracy; the others their one metric), and the overall score
    the unweighted mean of the task scores, so a task with two metrics weighs as much as one with
    one. `task_scores` maps a GLUE task name (GLUE_TASKS) to {metric name: value}; the result is
    on the values' scale (fractions in, a fraction out)."""
    if not task_scores:
        raise ValueError("glue_score needs at least one task")
    for task, metrics in task_scores.items():
        if task not in GLUE_TASKS:
            raise ValueError(
                f"{task!r} is not a task of the GLUE score (WNLI is left out, as in the BERT paper; "
                f"SWAG is no GLUE task); expected one of {', '.join(GLUE_TASKS)}"
            )
        if not metrics:
            raise ValueError(f"{task}: no metrics")
    return float(np.mean([np.mean(list(metrics.values())) for metrics in task_scores.values()]))
