"""What both fine-tuning stages do (finetune_squad, finetune_task@<task>); not a stage itself.

Each stage reads as the same steps, with its own model and training data in between:
`launch_finetuning` (check the global batch, start torchrun when there are several ranks),
`starting_point` (finetune.init's Hugging Face folder and its tokenizer), `check_model` (its
vocabulary and length fit), then `train_and_save` (the recipe and run settings of params.yaml, the
checkpoints, curves and figures of the run, the model in Hugging Face format).
The SQuAD and task modules stay apart so that an edit of one reruns only its stages.
"""

import dataclasses
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bert.distributed.launch import Distributed, launch
from bert.errors import UserError
from bert.text.tokenization import load_tokenizer_from_dir
from bert.training.finetune import FineTuningBatches, described_files
from bert.training.loop import Objective, RunRecord
from bert.training.run import TrainingRun
from stages.common import layout
from stages.common.params import Params

log = logging.getLogger("finetune")


def launch_finetuning(run: str, entry: list[str], argv: list[str], usage: str, params: Params, body) -> None:
    """Run `body(distributed)` on every rank of the fine-tuning run `run` ("squad" or a task)."""
    params.check_global_batch(run)
    launch(
        entry, argv, usage, params.distributed, body,
        checkpoint_dir=layout.checkpoints(run), log_dir=layout.logs(run), outputs=layout.OUTPUT_FOLDERS,
    )  # fmt: skip


@dataclass(frozen=True)
class StartingPoint:
    """The Hugging Face folder a run starts from (finetune.init's, or another task's model), as
    its stage left it, its tokenizer, and what the run's record calls it."""

    folder: Path
    tokenizer: object
    lower_case: bool
    init: str


def starting_point(
    params: Params, run: str, seed: int | None = None, from_task: str | None = None
) -> StartingPoint:
    """The folder fine-tuning starts from: finetune.init's, or (`from_task`) that task's fine-tuned
    model. Seeds torch with the run's seed first (the recipe's, unless `seed` replaces it), so
    every rank draws the same fresh head."""
    if from_task is None:
        folder, init = layout.init_directory(params.finetune.init), params.finetune.init
    else:
        folder, init = layout.model(from_task), f"tasks.{from_task}"
        if not (folder / "config.json").is_file():
            raise UserError(
                f"{folder}: no model for tasks.run.{run}: {from_task}; run `dvc repro finetune_task@{from_task}` first"
            )
    tokenizer, lower_case = load_tokenizer_from_dir(folder, params.vocab.lower_case)
    torch.manual_seed(params.recipe(run).seed if seed is None else seed)
    return StartingPoint(folder, tokenizer, lower_case, init)


@dataclass(frozen=True)
class Place:
    """Where one run of a stage writes: its checkpoints, curves, figures and model. A task's
    seeds (tasks.<task>.seeds) each have their own; the first seed's figures and model are the
    task's (the start of the tasks that name it as init), the others' beside them."""

    checkpoints: Path
    live: Path
    metrics: Path
    model: Path

    @classmethod
    def of(cls, run: str, seed: int | None = None, first: bool = True) -> "Place":
        if seed is None:
            return cls(
                layout.checkpoints(run), layout.live(run), layout.training_metrics(run), layout.model(run)
            )
        mark = layout.seed_folder(seed)
        return cls(
            layout.checkpoints(run) / mark,
            layout.live(run) / mark,
            layout.training_metrics(run) if first else layout.live(run) / f"{mark}.json",
            layout.model(run) if first else layout.model(run) / mark,
        )


def check_model(model: nn.Module, start: StartingPoint, max_seq_length: int, length_param: str) -> None:
    """The folder's weights cover its vocabulary, and its positions the param's length."""
    config, vocab_size = model.config, start.tokenizer.get_vocab_size()
    if config.vocab_size < vocab_size:
        raise UserError(
            f"{start.folder}: config.json has vocab_size {config.vocab_size}, {layout.tokenizer_file(start.folder).name} {vocab_size} tokens; "
            "the folder's weights and vocabulary do not belong together"
        )
    if max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"params.yaml: {length_param} {max_seq_length} exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings} ({start.folder})"
        )


@dataclass(frozen=True)
class TrainingData:
    """A run's training arrays (bert.training.finetune.FineTuningBatches' input), its objective, the file
    they come from, what else describes them (its checkpoints belong to these only), and what one
    row is called (SQuAD's are windows of a question's context)."""

    arrays: dict[str, np.ndarray]
    objective: Objective
    train_file: Path
    described: dict
    rows: str


def train_and_save(
    run: str, params: Params, distributed: Distributed, model: nn.Module, start: StartingPoint,
    data: TrainingData, label_names: tuple[str, ...] | None = None, seed: int | None = None,
    place: Place | None = None,
) -> None:  # fmt: skip
    """Fine-tune `model` (on its device) by params.yaml's recipe for `run` (its seed replaced by
    `seed` when given), then write it (to `place`, by default the run's)."""
    recipe, shared = params.recipe(run), params.finetune
    if seed is not None:
        recipe = dataclasses.replace(recipe, seed=seed)
    place = place or Place.of(run)
    examples = len(data.arrays["input_ids"])
    if examples < recipe.global_batch_size:
        override = layout.run_kind(run).of(run, "recipe")
        raise UserError(
            f"{data.train_file}: {examples} training {data.rows}, fewer than global_batch_size "
            f"{recipe.global_batch_size} (finetune.recipe, {override}): not one optimizer step; give more "
            "examples or lower the global batch size"
        )
    if distributed.is_main:
        log.info(
            "%s: init=%s (%s, %.1fM parameters), %d training %s%s; encoder on %s",
            run if seed is None else f"{run} seed {seed}", start.init, start.folder, model.num_parameters() / 1e6, examples, data.rows,
            ", binned by length" if shared.length_binning else "",
            "packed real tokens (unpad)" if shared.unpad else "padded batches",
        )  # fmt: skip
    start_files = sorted(path for path in start.folder.iterdir() if path.is_file())
    record = RunRecord(
        checkpoint_dir=place.checkpoints,
        live_dir=place.live,
        metrics_file=place.metrics,
        description={
            **data.described,
            "init": start.init,
            "files": described_files([data.train_file, *start_files]),
        },
        execution={"unpad": shared.unpad},
    )
    TrainingRun.build(
        model, data.objective, functools.partial(FineTuningBatches, data.arrays), recipe=recipe,
        settings=params.run_settings(run), record=record, max_steps=None, use_apex=False,
    ).train()  # fmt: skip
    if distributed.is_main:
        model.save_pretrained(place.model, layout.tokenizer_file(start.folder), start.lower_case, label_names)
        log.info("wrote %s", place.model)
