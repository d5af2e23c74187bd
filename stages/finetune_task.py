"""Stage finetune_task@<task>: fine-tune BERT on a SWAG or GLUE task's train split.

    python -m stages.finetune_task mrpc [--join NODE_RANK]

From finetune.init's Hugging Face directory (data/weights/<init>/, as for SQuAD), with the task's
max_seq_length, finetune.recipe with tasks.<task>.recipe's changes, and finetune's run settings
(stages/finetune.py): data/tasks/<task>/ -> data/models/tasks/<task>/ (Hugging Face format:
BertForMultipleChoice for SWAG, BertForSequenceClassification for GLUE), checkpoints in
data/checkpoints/tasks/<task>/ (resumed), dvclive/finetune_task/<task>/,
metrics/finetune_task/<task>.json. With distributed.nproc_per_node x nnodes > 1 the stage starts
itself again under torchrun, as finetune_squad does.
"""

import logging
import sys

from bert.distributed.launch import Distributed
from bert.errors import UserError, run_main
from bert.tasks.data import Task, read_split, task_named
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.training.finetune import task_objective
from stages import layout
from stages.finetune import TrainingData, check_model, launch_finetuning, starting_point, train_and_save
from stages.params import Params, load_params

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
    max_seq_length = getattr(params.tasks, task.name).max_seq_length
    start = starting_point(params, task.name)
    model = load_task_model(task, start.folder, unpad=params.finetune.unpad)
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
    train_and_save(task.name, params, distributed, model, start, data, label_names)


if __name__ == "__main__":
    run_main(main)
