"""bert.training.loop.train with the settings a test names and plain values for the rest: the loop
itself has no defaults (bert.training.recipe), so tests say here once what they leave unsaid."""

from pathlib import Path

from bert.training.loop import RunRecord, train
from bert.training.recipe import Recipe, RunSettings

SETTINGS = dict(precision="fp32", compile=False, length_binning=False, unpad=False, log_every=10,
                save_every=100, keep_last=2, resume=True, max_nonfinite_steps=10)  # fmt: skip


def run_loop(
    model, batches, objective, optimizer, scheduler, *, max_steps: int, grad_clip: float = 1.0, seed: int = 0,
    checkpoint_dir: Path | None = None, live_dir: Path | None = None, metrics_file: Path | None = None,
    description: dict | None = None, execution: dict | None = None, schedule: str = "poly",
    decay_share: float = 0.2, **settings,
) -> dict:  # fmt: skip
    """Train as bert.training.loop.train does; `settings` are RunSettings fields. The recipe's
    optimizer, rate and batch fields are the optimizer's and the data's business here: only its
    clipping, seed and schedule (which step a wsd run's pre-decay checkpoint is) reach the loop."""
    recipe = Recipe(optimizer="adamw", learning_rate=1.0, warmup_proportion=0.0, decay_power=1.0,
                    schedule=schedule, decay_share=decay_share, decay_shape="1-sqrt",
                    weight_decay=0.0, grad_clip=grad_clip, global_batch_size=1, micro_batch_size=1,
                    seed=seed)  # fmt: skip
    record = RunRecord(
        checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
        live_dir=live_dir,
        metrics_file=metrics_file,
        description=description or {},
        execution=execution or {},
    )
    return train(
        model, batches, objective, optimizer, scheduler, max_steps=max_steps, recipe=recipe,
        settings=RunSettings(**{**SETTINGS, **settings}), record=record, progress=False,
    )  # fmt: skip
