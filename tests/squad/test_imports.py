"""bert/squad/ is split along what DVC reruns: each SQuAD stage imports only the steps it runs, so
an edit of one step does not rerun the stages that do not use it."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def imported(module: str) -> set[str]:
    script = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


@pytest.mark.parametrize(
    "module, not_imported",
    [
        (
            "stages.finetune_squad",
            {"bert.squad.answers", "bert.squad.predict", "bert.squad.evaluation", "bert.tasks.objective"},
        ),
        ("stages.finetune_task", {"bert.squad.objective", "bert.squad.features"}),
        (
            "stages.predict_squad",
            {"bert.squad.evaluation", "bert.training.finetune", "bert.pretraining.loader"},
        ),
        ("stages.evaluate_squad", {"torch", "numpy", "bert.squad.features", "bert.squad.answers"}),
        (
            "stages.benchmark",
            {
                "bench",
                "bert.training.finetune",
                "bert.squad.objective",
                "bert.squad.answers",
                "bert.squad.evaluation",
            },
        ),
        ("bert.squad.__main__", {"torch", "numpy"}),
    ],
)
def test_each_stage_imports_only_the_question_answering_steps_it_runs(module, not_imported):
    assert not_imported.isdisjoint(imported(module))
