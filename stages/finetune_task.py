"""Stage finetune_task@<task>: fine-tune BERT on a SWAG or GLUE task's train split.

    python -m stages.finetune_task mrpc [--join NODE_RANK]

From where tasks.run.<task> says: finetune.init's Hugging Face directory (data/weights/<init>/, as
for SQuAD), or the model of the task it names (data/models/tasks/<start>/, a dependency of the stage:
its head kept when the labels are the same, else re-initialised), with the task's
max_seq_length, finetune.recipe with tasks.<task>.recipe's changes, and finetune's run settings
(stages/common/finetune.py): data/tasks/<task>/ -> data/models/tasks/<task>/ (Hugging Face format:
a multiple-choice model for SWAG, a sequence classifier for GLUE, in the start's family), checkpoints in
data/checkpoints/tasks/<task>/ (resumed), dvclive/finetune_task/<task>/,
metrics/finetune_task/<task>.json. With tasks.<task>.seeds, one run per seed: the first seed's
model and figures in those places, each other's in seed-<seed>/ below the model, checkpoints and
curves (figures: dvclive/finetune_task/<task>/seed-<seed>.json), and seeds.json beside the model;
the curve folder keeps only the current runs' curves (clear_curves_of_other_runs).
With distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun, as
finetune_squad does.
"""

import logging
import re
import shutil
import sys

from bert.atomic import write_json
from bert.distributed.launch import Distributed
from bert.errors import UserError, run_main
from bert.tasks.catalogue import Task, task_named
from bert.tasks.data import read_split
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model, load_task_model_from_task
from bert.tasks.objective import task_objective
from stages.common import layout
from stages.common.finetune import (
    Place,
    TrainingData,
    check_model,
    launch_finetuning,
    starting_point,
    train_and_save,
)
from stages.common.params import TASK_INIT_DEFAULT, Params, load_params

log = logging.getLogger("finetune_task")
USAGE = "python -m stages.finetune_task TASK [--join NODE_RANK]"


def main() -> None:
    if not sys.argv[1:]:
        raise UserError(f"usage: {USAGE}")
    task = task_named(sys.argv[1])
    params = load_params()
    launch_finetuning(
        task.name, ["stages.finetune_task", task.name], sys.argv[2:], USAGE, params,
        lambda d: run(task, params, d),
    )  # fmt: skip


def run(task: Task, params: Params, distributed: Distributed) -> None:
    settings = getattr(params.tasks, task.name)
    if distributed.is_main:
        clear_curves_of_other_runs(task.name, settings.seeds)
    if not settings.seeds:  # one run with the recipe's seed, where it always wrote
        run_seed(task, params, distributed)
        return
    for index, seed in enumerate(settings.seeds):
        run_seed(task, params, distributed, seed, Place.of(task.name, seed, first=index == 0))
    if distributed.is_main:
        write_json(layout.model(task.name) / layout.SEEDS_FILE, {"seeds": settings.seeds})


def clear_curves_of_other_runs(task: str, seeds: list[int]) -> None:
    """The task's curve folder holds the runs of these seeds alone (or the one run, without seeds).
    DVC keeps the folder across runs (persist: true, so that a resumed run keeps its curves) and
    each run clears only its own place in it, so the one run of before would stay beside the seeds'
    folders, or a seed dropped from the list beside the others, and dvc plots would draw them."""
    folder = layout.live(task)
    if not folder.is_dir():
        return
    marks = {layout.seed_folder(seed) for seed in seeds}
    for entry in sorted(folder.iterdir()):
        of_a_seed = re.fullmatch(r"seed-\d+(\.json)?", entry.name) is not None
        kept = entry.name.removesuffix(".json") in marks if seeds else not of_a_seed
        if not kept:
            log.info("%s: not a run of tasks.%s.seeds %s; removed", entry, task, seeds)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def run_seed(
    task: Task, params: Params, distributed: Distributed, seed: int | None = None, place: Place | None = None
) -> None:
    """One fine-tuning run of the task: with the recipe's seed, or with `seed` into `place`."""
    settings = getattr(params.tasks, task.name)
    max_seq_length = settings.max_seq_length
    start_name = params.tasks.run[task.name]
    from_task = None if start_name == TASK_INIT_DEFAULT else start_name
    start = starting_point(params, task.name, seed, from_task)
    if from_task is None:
        model = load_task_model(task, start.folder, unpad=params.finetune.unpad)
    else:
        model = load_task_model_from_task(
            task, task_named(from_task), start.folder, unpad=params.finetune.unpad
        )
    check_model(model, start, max_seq_length, f"tasks.{task.name}.max_seq_length")
    model.to(distributed.device)

    train_file = layout.task_data(task.name) / task.splits["train"]
    features = make_features(
        read_split(task, train_file),
        start.tokenizer,
        max_seq_length=max_seq_length,
        multiple_choice=task.kind == "choice",
        progress=distributed.is_main,
    )
    if distributed.is_main:
        log.info("%s (%s): %d examples (%d cut to %d tokens)", task.title, task.kind, len(features),
                 features.truncated, max_seq_length)  # fmt: skip
    data = TrainingData(
        features.training_arrays(),
        task_objective,
        train_file,
        {"task": task.name, "max_seq_length": max_seq_length},
        "examples",
    )
    label_names = task.labels if task.kind == "classification" else None
    train_and_save(task.name, params, distributed, model, start, data, label_names, seed, place)


if __name__ == "__main__":
    run_main(main)
