"""Stage finetune_task@<task>: fine-tune BERT on a SWAG or GLUE task's train split.

    python -m stages.finetune_task mrpc [--join NODE_RANK]

From finetune.init's Hugging Face directory (data/weights/<init>/, as for SQuAD), with the task's
max_seq_length, finetune.recipe with tasks.<task>.recipe's changes, and finetune's run settings:
data/tasks/<task>/ -> data/models/tasks/<task>/ (Hugging Face format: BertForMultipleChoice for
SWAG, BertForSequenceClassification for GLUE), checkpoints in data/checkpoints/tasks/<task>/
(resumed), dvclive/finetune_task/<task>/, metrics/finetune_task/<task>.json. With
distributed.nproc_per_node x nnodes > 1 the stage starts itself again under torchrun, as
finetune_squad does.
"""

import logging
import sys

import torch

from bert.distributed import Distributed, launch
from bert.errors import UserError, run_main
from bert.finetune import described_files, finetune, task_objective
from bert.tasks.data import Task, read_split, task_named
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.tokenization import load_tokenizer_from_dir
from stages import layout
from stages.params import Params, load_params

log = logging.getLogger("finetune_task")
USAGE = "python -m stages.finetune_task TASK [--join NODE_RANK]"


def main() -> None:
    if not sys.argv[1:]:
        raise UserError(f"usage: {USAGE}")
    task = task_named(sys.argv[1])
    params = load_params()
    params.check_global_batch(task.name)
    launch(
        ["stages.finetune_task", task.name],
        sys.argv[2:],
        USAGE,
        params.distributed,
        lambda distributed: run(task, params, distributed),
        checkpoint_dir=layout.checkpoints(f"tasks/{task.name}"),
        log_dir=layout.logs(f"tasks/{task.name}"),
        outputs=layout.OUTPUT_FOLDERS,
    )


def run(task: Task, params: Params, distributed: Distributed) -> None:
    shared, recipe = params.finetune, params.recipe(task.name)
    max_seq_length = getattr(params.tasks, task.name).max_seq_length
    source = layout.init_directory(shared.init)
    tokenizer, lower_case = load_tokenizer_from_dir(source, params.vocab.lower_case)
    torch.manual_seed(recipe.seed)  # the same fresh head on every rank
    model = load_task_model(task, source, unpad=shared.unpad)
    if max_seq_length > model.config.max_position_embeddings:
        raise UserError(
            f"params.yaml: tasks.{task.name}.max_seq_length {max_seq_length} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings} ({source})"
        )
    model.to(distributed.device)

    train_file = layout.task_data(task.name) / task.splits["train"]
    examples = read_split(task, train_file)
    features = make_features(
        examples,
        tokenizer,
        max_seq_length=max_seq_length,
        multiple_choice=task.kind == "choice",
        progress=distributed.is_main,
    )
    if len(features) < recipe.global_batch_size:
        raise UserError(
            f"{train_file}: {len(features)} examples, fewer than global_batch_size {recipe.global_batch_size} "
            f"(finetune.recipe, tasks.{task.name}.recipe): not one optimizer step; lower the global batch size"
        )
    if distributed.is_main:
        log.info(
            "%s (%s): init=%s (%.1fM parameters), %d examples (%d cut to %d tokens)",
            task.title, task.kind, shared.init, model.num_parameters() / 1e6, len(features),
            features.truncated, max_seq_length,
        )  # fmt: skip
    # What the run trains on (finetune adds the recipe): its checkpoints belong to these only.
    described = {
        "task": task.name,
        "init": shared.init,
        "files": described_files([train_file, *sorted(p for p in source.iterdir() if p.is_file())]),
        "max_seq_length": max_seq_length,
    }
    finetune(
        model,
        features.training_arrays(),
        task_objective,
        rank=distributed.rank,
        world_size=distributed.world_size,
        **params.finetuning(task.name),
        checkpoint_dir=layout.checkpoints(f"tasks/{task.name}"),
        live_dir=layout.live(f"finetune_task/{task.name}"),
        metrics_file=layout.metrics(f"finetune_task/{task.name}"),
        run_description=described,
        execution={"unpad": shared.unpad},
    )
    if distributed.is_main:
        out_dir = layout.task_model(task.name)
        label_names = task.labels if task.kind == "classification" else None
        model.save_pretrained(out_dir, source / "vocab.txt", lower_case, label_names)
        log.info("wrote %s", out_dir)


if __name__ == "__main__":
    run_main(main)
