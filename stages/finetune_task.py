"""Stage finetune_task@<task>: fine-tune BERT on a SWAG or GLUE task's train split.

    python -m stages.finetune_task mrpc [--join NODE_RANK]

From finetune.init's Hugging Face directory (data/weights/<init>/, as for SQuAD), with
params.tasks.<task>'s length, epochs, batch, learning rate and seed, and finetune's precision,
length binning, unpadding and logging: data/tasks/<task>/ -> data/models/tasks/<task>/ (Hugging
Face format: BertForMultipleChoice for SWAG, BertForSequenceClassification for GLUE), checkpoints in
data/checkpoints/tasks/<task>/ (resumed), dvclive/finetune_task/<task>/,
metrics/finetune_task/<task>.json. With distributed.nproc_per_node x nnodes > 1 the stage starts
itself again under torchrun, as finetune_squad does.
"""

import logging
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from bert.checkpoints import file_sha256, run_signature
from bert.distributed import node_rank_to_join, relaunch_under_torchrun, setup_distributed
from bert.errors import UserError, run_main
from bert.finetune import FineTuningBatches, init_directory, steps_for_epochs, task_objective
from bert.global_batch import accumulation_steps
from bert.optim import build_optimizer, warmup_poly_schedule
from bert.tasks.data import Task, read_split, task_named
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.tokenization import load_tokenizer_from_dir
from bert.training import TrainConfig, train
from stages.params import load_params

log = logging.getLogger("finetune_task")
TASKS_DIR = Path("data/tasks")
MODELS_DIR = Path("data/models/tasks")


def main() -> None:
    usage = "python -m stages.finetune_task TASK [--join NODE_RANK]"
    if not sys.argv[1:]:
        raise UserError(f"usage: {usage}")
    task = task_named(sys.argv[1])
    params = load_params()
    d = params.distributed
    node_rank = node_rank_to_join(sys.argv[2:], d.nnodes, usage)
    if node_rank is None:
        raise UserError(f"usage: {usage}")
    command = ["stages.finetune_task", task.name]
    if relaunch_under_torchrun(
        command, d.nproc_per_node, d.nnodes, d.rdzv_endpoint, d.max_restarts, node_rank,
        checkpoint_dir=f"data/checkpoints/tasks/{task.name}",
    ):  # fmt: skip
        return
    distributed = setup_distributed(d.backend, d.timeout_minutes)
    try:
        finetune(task, params, distributed)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def finetune(task: Task, params, distributed) -> None:
    spec, shared = getattr(params.tasks, task.name), params.finetune
    name = f"tasks.{task.name}."
    accumulation = accumulation_steps(
        spec.global_batch_size, spec.micro_batch_size, distributed.world_size, params=name
    )
    source = init_directory(shared.init)
    tokenizer, lower_case = load_tokenizer_from_dir(source, params.vocab.lower_case)

    torch.manual_seed(spec.seed)  # the same fresh head on every rank
    model = load_task_model(task, source, unpad=shared.unpad)
    if spec.max_seq_length > model.config.max_position_embeddings:
        raise UserError(
            f"params.yaml: {name}max_seq_length {spec.max_seq_length} exceeds the model's "
            f"max_position_embeddings {model.config.max_position_embeddings} ({source})"
        )
    model.to(distributed.device)

    train_file = TASKS_DIR / task.name / task.splits["train"]
    examples = read_split(task, train_file)
    features = make_features(
        examples, tokenizer, spec.max_seq_length, task.kind == "choice", progress=distributed.is_main
    )
    if len(features) < spec.global_batch_size:
        raise UserError(
            f"{train_file}: {len(features)} examples, fewer than {name}global_batch_size "
            f"{spec.global_batch_size}: not one optimizer step; lower {name}global_batch_size"
        )
    batches = FineTuningBatches(
        features.training_arrays(),
        spec.global_batch_size,
        spec.micro_batch_size,
        spec.seed,
        distributed.rank,
        distributed.world_size,
        shared.length_binning,
    )
    max_steps = steps_for_epochs(len(features), spec.epochs, spec.global_batch_size)
    optimizer = build_optimizer(model, "adamw", spec.learning_rate, spec.weight_decay, fused=True)
    scheduler = warmup_poly_schedule(
        optimizer, round(spec.warmup_proportion * max_steps), max_steps, power=1.0
    )
    if distributed.is_main:
        log.info(
            "%s (%s): init=%s (%.1fM parameters), %d examples (%d cut to %d tokens), global batch %d = %d x %d accum "
            "x %d ranks, %g epochs = %d steps",
            task.title, task.kind, shared.init, model.num_parameters() / 1e6, len(features), features.truncated,
            spec.max_seq_length, spec.global_batch_size, spec.micro_batch_size, accumulation,
            distributed.world_size, spec.epochs, max_steps,
        )  # fmt: skip
    described = described_run(task, params, source, train_file)
    config = TrainConfig(
        max_steps=max_steps,
        grad_accum_steps=accumulation,
        precision=shared.precision,
        grad_clip=1.0,
        log_every=shared.log_every,
        save_every=shared.save_every,
        checkpoint_dir=Path("data/checkpoints/tasks") / task.name,
        resume=True,
        seed=spec.seed,
        live_dir=Path("dvclive/finetune_task") / task.name,
        metrics_file=Path("metrics/finetune_task") / f"{task.name}.json",
        run_signature=run_signature(described),
        run_description=described,
        execution={"unpad": shared.unpad},
    )
    train(model, batches, task_objective, optimizer, scheduler, config)
    if distributed.is_main:
        out_dir = MODELS_DIR / task.name
        label_names = task.labels if task.kind == "classification" else None
        model.save_pretrained(out_dir, source / "vocab.txt", lower_case, label_names)
        log.info("wrote %s", out_dir)


def described_run(task: Task, params, source: Path, train_file: Path) -> dict:
    """What makes a checkpoint belong to this run (not the world size: resuming elsewhere is fine)."""
    spec = getattr(params.tasks, task.name)
    files = [train_file, *sorted(p for p in source.iterdir() if p.is_file())]
    return {
        "task": task.name,
        "init": params.finetune.init,
        "files": [(p.name, file_sha256(p)) for p in files],
        "max_seq_length": spec.max_seq_length,
        "optimizer": [spec.learning_rate, spec.warmup_proportion, spec.weight_decay, spec.epochs, spec.seed],
        "global_batch": spec.global_batch_size,
        "length_binning": params.finetune.length_binning,
    }


if __name__ == "__main__":
    run_main(main)
