"""What a training run learns (`Recipe`) and how it computes and records (`RunSettings`): one
typed recipe for pretraining phases and fine-tuning, with no defaults. A stage builds them once
from params.yaml (stages/common/schema.py checks every field against its type and range) and passes them
whole to the loop (bert.training.loop.train), the optimizer and the schedule (bert.training.optim)."""

from dataclasses import dataclass
from typing import Annotated, Literal

from bert.errors import SettingsError
from bert.ranges import Count, LearningRate, Precision, Range, Seed, Share, WeightDecay


@dataclass(frozen=True)
class Recipe:
    """What a run learns from its data and its starting weights, besides how long it trains: one
    type for a pretraining phase and a fine-tuning run, with no defaults (params.yaml gives every
    field: pretrain and pretrain.<phase>; finetune.recipe and its squad / task overrides)."""

    optimizer: Literal["lamb", "adamw"]
    learning_rate: LearningRate  # the peak, reached at the end of warm-up
    warmup_proportion: Share  # of the steps, over which the rate rises linearly
    decay_power: Annotated[float, Range(low=0, meaning="1 = linear decay to 0, 0 = constant")]  # poly's shape
    # poly: after warm-up the rate decays over all the remaining steps (BERT); wsd: warm-up, then
    # constant, then a decay over the last `decay_share` of the steps (bert.training.optim.learning_rate_schedule)
    schedule: Literal["poly", "wsd"]
    decay_share: Annotated[
        float, Range(0, 1, low_open=True, meaning="wsd: the share of the steps that decay")
    ]
    decay_shape: Literal["linear", "cosine", "1-sqrt"]  # wsd: how the rate falls to 0 over the decay
    weight_decay: WeightDecay  # decoupled; not on biases and LayerNorm weights
    grad_clip: Annotated[float, Range(low=0, meaning="0 = no clipping")]  # the global gradient norm
    global_batch_size: Count  # sequences (SQuAD: windows) per optimizer step, over every rank and micro-batch
    micro_batch_size: Count  # per rank and forward pass: accumulation = global / (micro x ranks)
    seed: Seed  # weights of fresh heads, data order, dropout, dynamic masks

    def __post_init__(self) -> None:
        if schedule_problem(self.schedule, self.warmup_proportion, self.decay_share):
            raise SettingsError(
                "recipe",
                lambda prefix: schedule_problem(
                    self.schedule, self.warmup_proportion, self.decay_share, prefix
                ),
            )


def schedule_problem(
    schedule: str, warmup_proportion: float, decay_share: float, prefix: str = ""
) -> str | None:
    """What is wrong with a schedule's shares of the steps (a line naming the fields, each after
    `prefix`: "pretrain.phase1."), or None. Under wsd the warm-up must be over where the decay
    starts: past it, the decay would start late and last less than decay_share of the steps, in a
    short run not at all (its last step at the peak rate). Equal to 1: warm-up, then decay."""
    if schedule == "wsd" and warmup_proportion + decay_share > 1 + 1e-9:  # 1e-9: 0.7 + 0.3 is 1
        return (
            f"{prefix}warmup_proportion {warmup_proportion:g} + {prefix}decay_share {decay_share:g} is "
            "over 1: under schedule wsd the warm-up would run past the start of the decay, so the rate "
            "would decay late or not at all; lower one of them so that they add up to at most 1"
        )
    return None


@dataclass(frozen=True)
class RunSettings:
    """How a run computes and what it records, with no defaults: pretrain's and finetune's
    shared keys in params.yaml."""

    precision: Precision  # fp32 | bf16 | fp16 (autocast; fp16 with a dynamic grad scaler)
    compile: bool  # torch.compile the model
    length_binning: bool  # micro-batches of similar-length sequences (the data order: part of the run)
    unpad: bool  # the encoder on packed real tokens
    log_every: Count  # steps between DVCLive rows
    save_every: Count  # steps between checkpoints (and one at the end)
    keep_last: Count  # checkpoints kept in the run's folder
    resume: bool  # from the newest checkpoint of the same run
    max_nonfinite_steps: Count  # non-finite steps in a row that stop the run


@dataclass(frozen=True)
class FineTuningRecipe(Recipe):
    """A fine-tuning run's recipe (finetune.recipe, with squad.recipe's or tasks.<task>.recipe's
    changes): how long it trains is passes over its training set."""

    epochs: Annotated[float, Range(0, low_open=True)]
