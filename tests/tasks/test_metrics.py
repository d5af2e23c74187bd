"""bert.tasks.metrics against the references GLUE's scorers use: scikit-learn and scipy (test
extras only; the project's metrics are numpy)."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from bert.tasks.metrics import (
    accuracy,
    average_ranks,
    f1,
    glue_score,
    matthews_corrcoef,
    pearson,
    spearman,
)

BINARY_CASES = {
    "mixed": ([1, 0, 1, 1, 0, 0, 1], [1, 0, 0, 1, 1, 0, 1]),
    "perfect": ([0, 1, 1, 0], [0, 1, 1, 0]),
    "inverse": ([1, 0, 0, 1], [0, 1, 1, 0]),
    "all predicted 1": ([1, 1, 1, 1], [1, 0, 1, 0]),
    "all predicted 0": ([0, 0, 0, 0], [1, 0, 1, 0]),
    "all labels 1": ([1, 0, 1, 1], [1, 1, 1, 1]),
    "all labels 0, none predicted": ([0, 0, 0], [0, 0, 0]),
    "all labels 0, some predicted": ([0, 1, 0], [0, 0, 0]),
    "one example": ([1], [1]),
}


def seeded_binary(seed: int, n: int = 500) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    flipped = rng.random(n) < 0.3  # predictions right 70% of the time
    return np.where(flipped, 1 - labels, labels), labels


def sklearn_reference(function, predictions, labels) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns where F1 / MCC are undefined (then 0)
        return float(function(labels, predictions))


@pytest.mark.parametrize("case", [*BINARY_CASES, "seed 0", "seed 1", "seed 2"])
def test_binary_metrics_equal_scikit_learn(case):
    if case in BINARY_CASES:
        predictions, labels = (np.array(side) for side in BINARY_CASES[case])
    else:
        predictions, labels = seeded_binary(int(case.split()[1]))
    assert accuracy(predictions, labels) == pytest.approx(sk.accuracy_score(labels, predictions), abs=1e-12)
    assert f1(predictions, labels) == pytest.approx(
        sklearn_reference(sk.f1_score, predictions, labels), abs=1e-12
    )
    expected_mcc = sklearn_reference(sk.matthews_corrcoef, predictions, labels)
    assert matthews_corrcoef(predictions, labels) == pytest.approx(expected_mcc, abs=1e-12)
    for value in (
        accuracy(predictions, labels),
        f1(predictions, labels),
        matthews_corrcoef(predictions, labels),
    ):
        assert type(value) is float


def test_binary_metrics_at_their_extremes():
    assert matthews_corrcoef(*BINARY_CASES["perfect"]) == 1.0 and f1(*BINARY_CASES["perfect"]) == 1.0
    assert matthews_corrcoef(*BINARY_CASES["inverse"]) == -1.0 and f1(*BINARY_CASES["inverse"]) == 0.0
    assert matthews_corrcoef(*BINARY_CASES["all predicted 1"]) == 0.0  # undefined: 0, as sklearn
    assert f1(*BINARY_CASES["all labels 0, none predicted"]) == 0.0
    # Accuracy also takes multi-class labels (MNLI, SWAG's choices).
    assert accuracy([0, 2, 1, 2], np.array([0, 1, 1, 2])) == 0.75


CORRELATION_CASES = {
    "ties on both sides": ([1.0, 2.0, 2.0, 3.0, 5.0, 5.0, 5.0], [0.5, 2.0, 1.0, 1.0, 4.0, 4.0, 3.0]),
    "perfect": ([0.1, 0.4, 0.2, 0.9], [1.0, 4.0, 2.0, 9.0]),
    "inverse": ([0.1, 0.4, 0.2, 0.9], [-1.0, -4.0, -2.0, -9.0]),
    "monotone, not linear": ([1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 8.0, 27.0, 64.0, 125.0]),
    "STS-B style integers": ([0, 1, 3, 5, 5, 2], [0.4, 1.2, 2.9, 4.1, 4.8, 2.0]),
}


@pytest.mark.parametrize("case", [*CORRELATION_CASES, "seed 0", "seed 1", "seed 2"])
def test_correlations_equal_scipy(case):
    if case in CORRELATION_CASES:
        predictions, references = (np.array(side) for side in CORRELATION_CASES[case])
    else:
        rng = np.random.default_rng(int(case.split()[1]))
        references = rng.integers(0, 26, 400) / 5  # STS-B's 0..5 in steps of 0.2: many ties
        predictions = references + rng.normal(0, 1.5, 400)
        predictions[::7] = np.round(predictions[::7])  # ties among the predictions too
    assert pearson(predictions, references) == pytest.approx(
        stats.pearsonr(predictions, references)[0], abs=1e-12
    )
    assert spearman(predictions, references) == pytest.approx(
        stats.spearmanr(predictions, references)[0], abs=1e-12
    )
    np.testing.assert_array_equal(average_ranks(predictions), stats.rankdata(predictions))
    assert type(pearson(predictions, references)) is float


def test_correlations_at_their_extremes_and_of_constant_input():
    assert pearson(*CORRELATION_CASES["perfect"]) == pytest.approx(1.0)
    assert spearman(*CORRELATION_CASES["inverse"]) == pytest.approx(-1.0)
    assert spearman(*CORRELATION_CASES["monotone, not linear"]) == pytest.approx(1.0)
    assert pearson(*CORRELATION_CASES["monotone, not linear"]) < 0.99
    # Undefined for a constant side: NaN, as scipy (which also warns). 0.1 x 3 has a mean that is
    # not exactly 0.1, so the check is on the values, not on a zero norm.
    constant = [0.1, 0.1, 0.1]
    assert math.isnan(pearson(constant, [1.0, 2.0, 3.0])) and math.isnan(spearman([1, 2, 3], constant))
    with pytest.warns(stats.ConstantInputWarning):
        assert math.isnan(stats.pearsonr(constant, [1.0, 2.0, 3.0])[0])


def test_mismatched_or_empty_inputs_are_refused():
    with pytest.raises(ValueError, match="same non-zero length"):
        accuracy([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="same non-zero length"):
        pearson([], [])
    with pytest.raises(ValueError, match="1-D"):
        f1([[1, 0]], [[1, 0]])


def test_glue_score_averages_each_tasks_metrics_then_the_tasks():
    scores = {
        "cola": {"matthews_corrcoef": 0.52},
        "mrpc": {"f1": 0.90, "accuracy": 0.86},
        "stsb": {"pearson": 0.88, "spearman": 0.86},
        "mnli": {"matched_accuracy": 0.84, "mismatched_accuracy": 0.82},
    }
    # Per task: 0.52, 0.88, 0.87, 0.83; their mean 0.775 (not the mean of all seven metrics).
    assert glue_score(scores) == pytest.approx(0.775)
    assert glue_score({"rte": {"accuracy": 66.4}}) == pytest.approx(66.4)  # the values' own scale
    with pytest.raises(ValueError, match="WNLI is left out"):
        glue_score({**scores, "wnli": {"accuracy": 0.56}})
    with pytest.raises(ValueError, match="SWAG is no GLUE task"):
        glue_score({"swag": {"accuracy": 0.8}})
    with pytest.raises(ValueError, match="at least one task"):
        glue_score({})


def test_a_task_over_seeds_reports_medians_and_spread_and_so_does_the_glue_score():
    from bert.tasks.evaluation import glue_over_seeds, over_seeds

    rte = over_seeds({1: {"accuracy": 60.0}, 2: {"accuracy": 70.0}, 3: {"accuracy": 52.0}})
    assert rte["accuracy"] == 60.0 and rte["spread"] == {"accuracy": 18.0}
    assert rte["seeds"] == {"1": {"accuracy": 60.0}, "2": {"accuracy": 70.0}, "3": {"accuracy": 52.0}}
    mrpc = over_seeds({1: {"f1": 80.0, "accuracy": 70.0}, 2: {"f1": 90.0, "accuracy": 80.0}})
    assert (mrpc["f1"], mrpc["accuracy"]) == (85.0, 75.0)  # an even count: the mean of the middle two
    sst2 = {"accuracy": 90.0}  # one run: its figures at every seed position
    names = {"rte": ["accuracy"], "mrpc": ["f1", "accuracy"], "sst2": ["accuracy"]}
    glue = glue_over_seeds({"rte": rte, "mrpc": mrpc, "sst2": sst2}, names)
    # position 0: rte 60, mrpc 75, sst2 90; 1: 70, 85, 90; 2: 52, mrpc's medians 80, 90
    assert glue["glue_score_by_seed"] == pytest.approx([75.0, 245 / 3, 74.0])
    assert glue["glue_score_spread"] == pytest.approx(245 / 3 - 74.0)
    assert glue["task_score_spread"] == {"rte": 18.0, "mrpc": 10.0}
    assert glue_over_seeds({"sst2": sst2}, {"sst2": ["accuracy"]}) == {}  # no seeds: today's glue.json
