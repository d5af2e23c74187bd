"""One way to build a training run, for a pretraining phase and a fine-tuning run alike.

    run = TrainingRun.build(model, objective, data, recipe=..., settings=..., record=..., max_steps=..., use_apex=...)
    run.train()

A stage gives what is its own: the model (on its device, with its head), the objective, its data
as a loader to make (`data`: PretrainingData or FineTuningBatches with the stage's files and
workers bound), and a RunRecord naming its folders, its data and starting weights (`description`)
and how it computes besides the run settings (`execution`). The build does the rest the same way
for every run: the loader from the recipe's batch and seed and the settings' length binning on
this process's rank; the run's length (`max_steps`, or a FineTuningRecipe's epochs over the
loader's examples); the optimizer and, after an optional starting state (`optimizer_start`:
pretraining phase 2 continues phase 1's moments), the learning-rate schedule; and the record's
description completed with the recipe (bert.training.checkpoints.described_recipe), which the
checkpoints' signature hashes. The loop (bert.training.loop.train) then takes the run whole.
"""

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from bert.training.checkpoints import described_recipe
from bert.training.collectives import rank_and_world_size
from bert.training.loop import Objective, RunRecord, train
from bert.training.optim import learning_rate_schedule, recipe_optimizer
from bert.training.recipe import FineTuningRecipe, Recipe, RunSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainingRun:
    """Everything `bert.training.loop.train` takes, built once by `build`."""

    model: nn.Module
    batches: Iterable[dict]
    objective: Objective
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    max_steps: int
    recipe: Recipe
    settings: RunSettings
    record: RunRecord  # its description holds the recipe: the checkpoints belong to this run alone

    @classmethod
    def build(
        cls,
        model: nn.Module,
        objective: Objective,
        data: Callable[..., Iterable[dict]],
        *,
        recipe: Recipe,
        settings: RunSettings,
        record: RunRecord,
        max_steps: int | None,
        use_apex: bool,
        optimizer_start: Callable[[torch.optim.Optimizer], None] | None = None,
        fused_on_cpu: bool = False,
    ) -> "TrainingRun":
        """The run of `model` (on its device) by `recipe` and `settings`. `data` is called with the
        batching keywords (global_batch_size, micro_batch_size, seed, rank, world_size,
        length_binning) and returns the rank's micro-batches. `max_steps`: the run's optimizer
        steps; None for a FineTuningRecipe, whose epochs count passes over the loader's
        `num_examples`. `optimizer_start(optimizer)` loads a starting state into the fresh
        optimizer before the schedule is built on it. `fused_on_cpu`: AdamW's fused kernel on CPU
        too (bert.training.optim.recipe_optimizer; pretraining asks for it)."""
        rank, world_size = rank_and_world_size()
        batches = data(
            global_batch_size=recipe.global_batch_size, micro_batch_size=recipe.micro_batch_size,
            seed=recipe.seed, rank=rank, world_size=world_size, length_binning=settings.length_binning,
        )  # fmt: skip
        if max_steps is None:
            if not isinstance(recipe, FineTuningRecipe):
                raise ValueError("max_steps is None, but the recipe has no epochs to count steps by")
            max_steps = steps_for_epochs(batches.num_examples, recipe.epochs, recipe.global_batch_size)
        optimizer = recipe_optimizer(model, recipe, use_apex, fused_on_cpu)
        if optimizer_start is not None:
            optimizer_start(optimizer)
        scheduler = learning_rate_schedule(optimizer, recipe, max_steps)
        described = {**record.description, "recipe": described_recipe(recipe, settings.length_binning)}
        if rank == 0:
            epochs = f" ({recipe.epochs:g} epochs)" if isinstance(recipe, FineTuningRecipe) else ""
            log.info(
                "global batch %d = %d x %d accum x %d ranks, %d steps%s; %s, lr %g",
                recipe.global_batch_size, recipe.micro_batch_size, getattr(batches, "accumulation_steps", 1),
                world_size, max_steps, epochs, recipe.optimizer, recipe.learning_rate,
            )  # fmt: skip
        return cls(
            model, batches, objective, optimizer, scheduler, max_steps, recipe, settings,
            dataclasses.replace(record, description=described),
        )  # fmt: skip

    def train(self, progress: bool = True) -> dict:
        """Train to max_steps (resuming the run's newest checkpoint); the final figures."""
        return train(
            self.model, self.batches, self.objective, self.optimizer, self.scheduler,
            max_steps=self.max_steps, recipe=self.recipe, settings=self.settings, record=self.record,
            progress=progress,
        )  # fmt: skip


def steps_for_epochs(num_windows: int, epochs: float, global_batch_size: int) -> int:
    """Optimizer steps that cover `epochs` passes over the training windows (at least 1)."""
    return max(1, math.ceil(epochs * (num_windows // global_batch_size)))
