"""The training loop every training stage runs (pretraining, SQuAD fine-tuning).

One optimizer step, on one global batch (bert.training.global_batch: micro-batch x accumulation steps x
ranks; the data says how many micro-batches make a step, `accumulation_steps`):
  count the items each loss term averages over (masked tokens, sequences, ...) in the rank's
      micro-batches of the step, and all-reduce the counts: the global batch's totals;
  for each micro-batch: forward under autocast, backward of the sum of its loss terms, each
      weighted by the micro-batch's share of the term's global items (DDP all-reduces gradients
      only on the last micro-batch: `no_sync` on the others). So each term is the mean over all
      its items of the global batch, and the gradients do not depend on how the rows are split
      into micro-batches and ranks;
  unscale (fp16), clip the global gradient norm to grad_clip, optimizer step (skipped when the
  gradients are not finite), scheduler step.
Every log_every steps the stats, and the throughput figures (bert.training.throughput: real
tokens/s, padding, model FLOP/s, MFU, the share of time waiting for data), are summed over ranks
and written to DVCLive under "train/"; every
save_every steps (and at the end) rank 0 writes one checkpoint file (bert.training.checkpoints), from which
a killed run resumes exactly. SIGTERM or SIGUSR1 (pre-emption) stops every rank at the same step
boundary, after a checkpoint. The processes of a run: bert.distributed.launch.
"""

import contextlib
import dataclasses
import json
import logging
import math
import random
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from bert.atomic import atomic_file, write_json
from bert.errors import UserError
from bert.model.precision import AUTOCAST_DTYPES, allow_tf32, grad_scaler
from bert.training.checkpoints import (
    checkpoint_step,
    checkpoint_to_resume,
    newest_checkpoint,
    run_signature,
    save_checkpoint,
    source_fingerprint,
)
from bert.training.collectives import PREEMPTION_SIGNALS, all_reduce_sum, barrier, rank_and_world_size
from bert.training.optim import decay_start, fit_optimizer_state
from bert.training.recipe import Recipe, RunSettings
from bert.training.throughput import RUN_SUMS, ThroughputMeter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Objective:
    """What `train` minimises: the sum of loss terms, each the mean over its items (masked tokens,
    sequences, SQuAD windows) of the whole global batch.

    loss(model, batch) -> (terms, stats): terms: name -> the term's mean over the batch's items;
        stats: name -> (total, count), logged as total/count summed over micro-batches and ranks
        (e.g. "mlm_accuracy": (correct, masked tokens)).
    items(batch) -> name -> the batch's number of items of each term, read from the batch alone
        (it is called on all of a step's micro-batches before their forward passes).
    flops(model, batch) -> the model FLOPs of a training step on the batch's real tokens
        (bert.model.flops; model: the unwrapped model, batch: on the host), for the logged model FLOP/s
        and MFU (bert.training.throughput); None for a model bert.model.flops cannot count.
    Each term is logged under its name, as the mean over the log interval's items, and "loss" is
    their sum."""

    loss: Callable[[nn.Module, dict], tuple[dict[str, torch.Tensor], dict[str, tuple]]]
    items: Callable[[dict], dict[str, torch.Tensor | int]]
    # A default, unlike the run's recipe and settings: it changes what is logged, never what is learnt.
    flops: Callable[[nn.Module, dict], float] | None = None


def per_row(
    loss_fn: Callable[[nn.Module, dict], tuple[torch.Tensor, dict]],
    flops: Callable[[nn.Module, dict], float] | None = None,
) -> Objective:
    """The Objective of a loss that is a mean over the batch's rows: loss_fn(model, batch) -> (loss, stats)."""

    def loss(model: nn.Module, batch: dict) -> tuple[dict, dict]:
        value, stats = loss_fn(model, batch)
        return {"loss": value}, stats

    return Objective(loss, lambda batch: {"loss": _batch_len(batch)}, flops)


@dataclass(frozen=True)
class RunRecord:
    """Where a run keeps what it writes, and what it is: `description` says what it learns from
    (params, data, starting weights; its checkpoints belong to that alone, bert.training.checkpoints) and
    `execution` how it computes besides precision, compile and the world size (say {"unpad": True})."""

    checkpoint_dir: Path | None  # None: no checkpoints
    live_dir: Path | None  # DVCLive folder; None: no DVCLive
    metrics_file: Path | None  # final figures as JSON
    description: dict
    execution: dict

    @property
    def signature(self) -> str:
        return run_signature(self.description)


def train(
    model: nn.Module,
    batches: Iterable[dict],
    objective: Objective,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    max_steps: int,
    recipe: Recipe,
    settings: RunSettings,
    record: RunRecord,
    progress: bool = True,
) -> dict:
    """Train `model` (already on its device) for `max_steps` optimizer steps and return the final
    figures (also written to record.metrics_file). `batches` yields dicts of tensors (one rank's
    micro-batches; `accumulation_steps` of them make a step, one for a plain iterable); it is
    iterated again for each epoch, told the epoch through `set_epoch(epoch)` and a resume position
    through `skip_samples(n)` when it has them (n: global samples consumed in the epoch, a whole
    number of global batches, so a checkpoint's position holds on any number of ranks). Resumes from
    the newest checkpoint of the run in record.checkpoint_dir when settings.resume. For a bit-exact
    resume, `batches` must not draw from torch's global RNG (give a DataLoader a `generator`)."""
    run, state = _start(model, batches, objective, optimizer, scheduler, max_steps, recipe, settings, record)
    # Closing the bar on the way out, an error too: the error's line must come last, on its own.
    shown = run.rank == 0 and progress
    with (
        tqdm(total=max_steps, initial=state.step, disable=not shown, desc="train") as bar,
        _Preemption() as preemption,
    ):
        while state.step < max_steps:
            step_loss = _accumulate_gradients(run)
            loss, grad_norm, skipped = _optimizer_step(run, step_loss)
            learning_rate = scheduler.get_last_lr()[0]
            scheduler.step()
            state.step += 1
            bar.update(1)
            # Counts a skipped step; raises after max_nonfinite_steps in a row.
            run.nonfinite.after_step(state.step, loss, skipped, state.totals)
            run.interval.add_step(grad_norm if math.isfinite(grad_norm) else None, learning_rate)

            if state.step % settings.log_every == 0 or state.step == max_steps:
                _log_interval(run, state, bar, learning_rate)
            due = state.step % settings.save_every == 0 or state.step in (max_steps, run.pre_decay)
            if due:
                _checkpoint(run, state)
            if state.step < max_steps and preemption.agreed():  # every rank, at the same step
                if not due:
                    _checkpoint(run, state)
                barrier()  # no rank exits (and has torchrun stop the others) before rank 0 has written
                raise preemption.error(state.step, record.checkpoint_dir)
    return _finish(run, state)


@dataclass
class Totals:
    """The run's figures summed over its steps so far; its checkpoints keep them (as the dict
    `saved()` gives), so that a resumed run's summary covers the whole run."""

    seconds: float  # of training, checkpoints included, start-up not
    sequences: int  # trained on, over all ranks
    skipped_steps: int  # whose update was skipped (non-finite loss or gradients)
    first_loss: float | None  # the first finite one
    last: dict  # the figures of the last log interval
    throughput: dict  # bert.training.throughput's run sums (RUN_SUMS)

    @classmethod
    def fresh(cls) -> "Totals":
        return cls(0.0, 0, 0, None, {}, dict.fromkeys(RUN_SUMS, 0.0))

    @classmethod
    def restored(cls, saved: dict) -> "Totals":
        """From a checkpoint's "totals"; one written before the throughput figures has none of them."""
        return cls(**{**dataclasses.asdict(cls.fresh()), **saved})

    def saved(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class RunState:
    """Where the run is, changing every step: its step, its totals (with the data position of
    `_Run.data`, what a checkpoint saves besides the training objects), and its two clocks."""

    step: int
    totals: Totals
    first_step: int  # where this process started: a resumed run counts its own steps apart
    counted_until: float  # time.perf_counter() up to which totals.seconds counts
    interval_start: float  # when the current log interval began

    def count_seconds(self) -> None:
        """Bring totals.seconds up to now."""
        now = time.perf_counter()
        self.totals.seconds += now - self.counted_until
        self.counted_until = now

    def end_interval(self) -> float:
        """The seconds of the log interval now ending; the next one starts."""
        now = time.perf_counter()
        seconds, self.interval_start = now - self.interval_start, now
        return seconds


@dataclass(frozen=True)
class _Run:
    """What `train` sets up once (`_start`) and each step uses."""

    model: nn.Module  # as given: its weights are what checkpoints save and clipping reads
    forward_model: nn.Module  # what the steps run: the model in DDP and torch.compile when asked
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    objective: Objective
    data: "_Batches"
    accumulation: int  # micro-batches per optimizer step on each rank
    amp_dtype: torch.dtype | None
    recipe: Recipe
    settings: RunSettings
    record: RunRecord
    execution: dict | None  # how it computes, in its checkpoints (None: no checkpoints)
    max_steps: int
    # A warmup-stable-decay run checkpoints the step before its decay and keeps that file: the
    # point to extend the run or branch a decay from (bert.training.checkpoints resumes there).
    pre_decay: int | None
    rank: int
    world_size: int
    live: object | None  # DVCLive, on rank 0 with a live_dir
    interval: "_Interval"
    meter: ThroughputMeter
    nonfinite: "_NonFinite"


def _start(
    model: nn.Module, batches: Iterable[dict], objective: Objective, optimizer, scheduler, max_steps: int,
    recipe: Recipe, settings: RunSettings, record: RunRecord,
) -> tuple[_Run, RunState]:  # fmt: skip
    """The run set up and its state: resumed from the newest checkpoint of the run, or seeded
    afresh at step 0; then the model wrapped, the data at its position, and what logs."""
    if settings.precision not in AUTOCAST_DTYPES:
        raise ValueError(f"precision {settings.precision!r}: allowed {', '.join(AUTOCAST_DTYPES)}")
    rank, world_size = rank_and_world_size()
    device = next(model.parameters()).device
    allow_tf32(device, settings.precision)
    scaler = grad_scaler(settings.precision, device)
    accumulation = getattr(batches, "accumulation_steps", 1)

    # Once, here: a resuming process computes the execution record at the same point, with the same modules imported.
    execution, saved = None, None
    if record.checkpoint_dir:
        execution = _execution(settings, record, world_size, accumulation)
        saved = checkpoint_to_resume(
            record.checkpoint_dir, record.signature, execution, max_steps, settings.resume, rank,
            record.description,
        )  # fmt: skip
    step, epoch, samples, totals = _restore_or_seed(
        saved, model, optimizer, scheduler, scaler, recipe.seed, rank, world_size
    )
    forward_model = _forward_model(model, world_size, settings.compile)
    data = _Batches(batches, world_size, epoch, samples)
    live = _open_live(record.live_dir, step, resumed=saved is not None) if rank == 0 else None
    interval = _Interval(device)
    # Before the clock starts: on a CPU it measures the peak, which no step should pay for.
    meter = ThroughputMeter(
        _unwrap(model), objective.flops, device, settings.precision, totals.throughput, rank == 0
    )
    run = _Run(
        model=model, forward_model=forward_model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
        objective=objective, data=data, accumulation=accumulation, amp_dtype=AUTOCAST_DTYPES[settings.precision],
        recipe=recipe, settings=settings, record=record, execution=execution, max_steps=max_steps,
        pre_decay=decay_start(recipe, max_steps), rank=rank, world_size=world_size, live=live,
        interval=interval, meter=meter,
        nonfinite=_NonFinite(settings.max_nonfinite_steps, scaler.is_enabled(), record.checkpoint_dir),
    )  # fmt: skip
    now = time.perf_counter()
    return run, RunState(step, totals, first_step=step, counted_until=now, interval_start=now)


def _log_interval(run: _Run, state: RunState, bar: tqdm, learning_rate: float) -> None:
    """The figures of the log interval now ending, summed over ranks: kept as the totals' last,
    and on rank 0 shown on the bar and written to DVCLive."""
    seconds = state.end_interval()
    figures = run.interval.reduce(seconds)
    figures.update(run.meter.interval(seconds, run.world_size))
    state.totals.sequences += figures.pop("sequences")
    state.totals.last = figures
    if run.rank == 0:
        _log(bar, run.live, state.step, figures, learning_rate)


def _checkpoint(run: _Run, state: RunState) -> None:
    """This step's state into one file (rank 0 writes; every rank gives its RNG state), after a
    finite step only, so that the newest checkpoint is always a state to go back to."""
    if run.record.checkpoint_dir and run.nonfinite.in_row == 0:
        state.count_seconds()
        _save(run, state)


def _finish(run: _Run, state: RunState) -> dict:
    """The run's final figures: logged, and written to record.metrics_file on rank 0."""
    state.count_seconds()
    summary = {
        **_summary(state.totals, state.step),
        **run.meter.summary(state.totals.seconds, run.world_size),
    }
    if run.live is not None:
        run.live.end()
    if run.rank == 0 and run.record.metrics_file:
        write_json(run.record.metrics_file, dict(sorted(summary.items())))
    log.info(
        "trained %d steps (%d in this run): %s",
        state.step,
        state.step - state.first_step,
        json.dumps(summary),
    )
    return summary


def _execution(settings: RunSettings, record: RunRecord, world_size: int, accumulation: int) -> dict:
    """How the run computes: recorded in its checkpoints (see bert.training.checkpoints)."""
    return {
        "code": source_fingerprint(),
        "precision": settings.precision,
        "compile": settings.compile,
        "world_size": world_size,
        "grad_accum_steps": accumulation,
        **record.execution,
    }


def _restore_or_seed(
    saved: dict | None, model, optimizer, scheduler, scaler, seed: int, rank: int, world_size: int
) -> tuple[int, int, int, Totals]:
    """Load a checkpoint's state into the training objects, or seed a fresh run; returns the
    step, the data position (epoch, samples consumed in it) and the running totals."""
    if saved is None:
        seed_everything(seed, rank)
        return 0, 0, 0, Totals.fresh()
    _unwrap(model).load_state_dict(saved["model"])
    optimizer.load_state_dict(fit_optimizer_state(saved["optimizer"], optimizer))
    scheduler.load_state_dict(saved["scheduler"])
    _learning_rate_from_schedule(scheduler)
    scaler.load_state_dict(saved["scaler"])
    step, epoch, samples = saved["step"], saved["data"]["epoch"], saved["data"]["samples"]
    log.info("resumed from step %d (epoch %d, sample %d of it)", step, epoch, samples)
    rngs = saved["rng"]
    if len(rngs) == world_size:
        _set_rng_state(rngs[rank])
    else:  # another world size: data and weights are exact, dropout draws cannot be
        seed_everything(seed + step, rank)
    return step, epoch, samples, Totals.restored(saved["totals"])


def _learning_rate_from_schedule(scheduler) -> None:
    """Set the resumed step's learning rate from the schedule, not from the checkpoint's optimizer:
    a run extended to a larger max_steps goes on with its schedule recomputed for the new total
    (for an unchanged schedule this is the very value LambdaLR would set)."""
    if isinstance(scheduler, torch.optim.lr_scheduler.LambdaLR):
        rates = [
            base * factor(scheduler.last_epoch)
            for base, factor in zip(scheduler.base_lrs, scheduler.lr_lambdas)
        ]
        for group, rate in zip(scheduler.optimizer.param_groups, rates):
            group["lr"] = rate
        scheduler._last_lr = rates


class _Preemption:
    """SIGTERM / SIGUSR1 (a pre-empting scheduler, torchrun passing one on) ask the run to stop: the
    handlers only note it, and `agreed()`, called by every rank at every step boundary, tells all
    of them at once (an all-reduce), so they stop at the same step and the checkpoint is whole."""

    def __init__(self):
        self.received: str | None = None
        self.previous: dict = {}

    def __enter__(self) -> "_Preemption":
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            for name in PREEMPTION_SIGNALS:
                self.previous[name] = signal.signal(getattr(signal, name), self._note)
        return self

    def __exit__(self, *exc) -> None:
        for name, handler in self.previous.items():
            signal.signal(getattr(signal, name), handler)

    def _note(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name

    def agreed(self) -> bool:
        _, world_size = rank_and_world_size()
        if world_size == 1:
            return self.received is not None
        flag = torch.tensor([float(self.received is not None)], device=_collective_device())
        return all_reduce_sum(flag).item() > 0

    def error(self, step: int, checkpoint_dir) -> UserError:
        """The line a stopped rank ends with; it names the checkpoint the disk holds, not the one
        that was meant to be written."""
        by = self.received or "a signal to another rank"
        newest = newest_checkpoint(checkpoint_dir)
        if newest and checkpoint_step(newest) == step:
            saved = f"checkpoint of step {step} in {checkpoint_dir}"
        elif newest:
            saved = f"no checkpoint of it; the newest is step {checkpoint_step(newest)} in {checkpoint_dir}"
        else:
            saved = "no checkpoint written"
        return UserError(f"pre-empted by {by} at step {step} ({saved}); run the stage again to resume")


def _collective_device() -> torch.device:
    """Where a collective's tensor must live: the GPU with NCCL, the CPU with gloo."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _save(run: _Run, state: RunState) -> None:
    """Every rank's RNG states go into rank 0's checkpoint (bert.training.checkpoints describes the file)."""
    rng = _rng_state()
    if run.world_size > 1:
        rngs = [None] * run.world_size
        dist.all_gather_object(rngs, rng)
    else:
        rngs = [rng]
    if run.rank != 0:
        return
    checkpoint = {
        "step": state.step,
        "model": _unwrap(run.model).state_dict(),
        "optimizer": run.optimizer.state_dict(),
        "scheduler": run.scheduler.state_dict(),
        "scaler": run.scaler.state_dict(),
        "rng": rngs,
        "data": {"epoch": run.data.epoch, "samples": run.data.samples},
        "totals": state.totals.saved(),
        "max_steps": run.max_steps,  # a larger one later extends the run
        "decay_start": run.pre_decay,  # wsd: a run extended past it goes on from the pre-decay checkpoint
        "signature": run.record.signature,
        "description": run.record.description,
        "execution": run.execution,  # with the world size
    }
    path = save_checkpoint(
        run.record.checkpoint_dir, state.step, checkpoint, run.settings.keep_last, keep_step=run.pre_decay
    )
    log.info("step %d: checkpoint %s", state.step, path)


def _forward_model(model: nn.Module, world_size: int, compile: bool) -> nn.Module:
    """The model the steps run: DDP around it on more than one rank, torch.compile'd when asked."""
    forward_model = model
    if world_size > 1:
        device = next(model.parameters()).device
        device_ids = [device.index] if device.type == "cuda" else None
        forward_model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if compile:
        forward_model = torch.compile(forward_model)
    forward_model.train()
    return forward_model


def _accumulate_gradients(run: _Run) -> torch.Tensor:
    """Forward and backward of one step's micro-batches; returns this rank's share of the step's
    loss (summed over the ranks: the loss of the global batch)."""
    forward_model, objective, scaler, amp_dtype = run.forward_model, run.objective, run.scaler, run.amp_dtype
    accum_steps, world_size, interval = run.accumulation, run.world_size, run.interval
    device = interval.device
    batches = run.meter.take(run.data, accum_steps)  # still on the host: counting them is cheap
    counted = [objective.items(batch) for batch in batches]
    names = sorted(counted[0])
    items = torch.tensor([[float(count[name]) for name in names] for count in counted])  # [micro, term]
    # One small all-reduce: the global batch's items of each term, known before any backward.
    global_items = all_reduce_sum(items.sum(0).to(device))
    # A micro-batch term's weight: its share of the term's items in the global batch, times the
    # world size because DDP averages the ranks' gradients. 1.0 exactly for one micro-batch on one rank.
    weights = items.to(device) / global_items.clamp(min=1) * world_size
    step_loss = torch.zeros((), device=device)
    for micro, batch in enumerate(batches):
        batch = _to_device(batch, device)
        last = micro == accum_steps - 1
        sync = contextlib.nullcontext() if last or world_size == 1 else _no_sync(forward_model)
        with sync:
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                terms, stats = objective.loss(forward_model, batch)
            # A term without items here (a micro-batch with no masked token) is not a number: left out.
            loss = sum(terms[name] * weights[micro, t] for t, name in enumerate(names) if items[micro, t] > 0)
            if torch.is_tensor(loss):
                scaler.scale(loss).backward()
                step_loss += loss.detach().float() / world_size
        stats = {**stats, **{name: (terms[name].detach() * items[micro, t], items[micro, t])
                             for t, name in enumerate(names) if items[micro, t] > 0}}  # fmt: skip
        interval.add(names, stats, _batch_len(batch))
    return step_loss


def _optimizer_step(run: _Run, step_loss: torch.Tensor) -> tuple[float, float, bool]:
    """Clip and apply the accumulated gradients; returns the step's loss (of the global batch: the
    ranks' shares summed), the gradient norm and whether the update was skipped for non-finite values."""
    optimizer, scaler = run.optimizer, run.scaler
    if scaler.is_enabled():
        scaler.unscale_(optimizer)
    max_norm = run.recipe.grad_clip if run.recipe.grad_clip > 0 else math.inf
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), max_norm)
    # One small all-reduce of the step's loss, so every rank takes the same skip decision.
    mean_loss, norm = all_reduce_sum(torch.stack([step_loss, grad_norm.float()])).tolist()
    norm /= run.world_size  # the gradients were all-reduced already: every rank has the same norm
    if scaler.is_enabled():
        scale = scaler.get_scale()
        scaler.step(optimizer)  # skips the update itself when the gradients overflowed
        scaler.update()
        skipped = scaler.get_scale() < scale
    else:
        skipped = not (math.isfinite(mean_loss) and math.isfinite(norm))
        if not skipped:
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return mean_loss, norm, skipped


class _NonFinite:
    """Steps whose loss or gradients were not finite: their updates are skipped and counted, and
    `limit` in a row stop the run. An fp16 overflow that the grad scaler skipped is the scaler at
    work (it lowers the scale and goes on), not a divergence."""

    def __init__(self, limit: int, scaler_enabled: bool, checkpoint_dir: Path | None):
        self.limit, self.scaler_enabled, self.checkpoint_dir = limit, scaler_enabled, checkpoint_dir
        self.in_row = 0

    def after_step(self, step: int, loss: float, skipped: bool, totals: Totals) -> None:
        loss_finite = math.isfinite(loss)
        totals.skipped_steps += int(skipped)
        if skipped:
            log.warning(
                "step %d: non-finite %s, update skipped", step, "gradients" if loss_finite else "loss"
            )
        diverging = not loss_finite or (skipped and not self.scaler_enabled)
        self.in_row = self.in_row + 1 if diverging else 0
        if totals.first_loss is None and loss_finite:
            totals.first_loss = loss
        if self.in_row >= self.limit:
            newest = newest_checkpoint(self.checkpoint_dir)
            raise UserError(
                f"the loss or its gradients were not finite for {self.in_row} steps in a row (up to step {step}); "
                f"stopped. Last good checkpoint: {newest or 'none'}. Lower the learning rate, "
                "use bf16 instead of fp16, or raise max_nonfinite_steps"
            )


def _log(progress: tqdm, live, step: int, figures: dict, learning_rate: float) -> None:
    progress.set_postfix(loss=f"{figures['loss']:.4f}", lr=f"{learning_rate:.2e}")
    if live is not None:
        live.step = step
        for name, value in figures.items():
            live.log_metric(f"train/{name}", value)
        live.next_step()


def _summary(totals: Totals, step: int) -> dict:
    """The final figures: the last log interval's, and the run's totals."""
    summary = {
        **totals.last,
        "first_loss": totals.first_loss,
        "steps": step,
        "sequences_per_second": totals.sequences / totals.seconds if totals.seconds else 0.0,
        "seconds": totals.seconds,
        "skipped_steps": totals.skipped_steps,
        # The model bytes depend on it (the order of float reductions): recorded so that two runs
        # whose hashes differ can be told apart (docs/operations.md, "What is reproducible").
        "cpu_threads": torch.get_num_threads(),
    }
    summary.pop("learning_rate", None)
    return summary


def _unwrap(model: nn.Module) -> nn.Module:
    model = getattr(model, "_orig_mod", model)  # torch.compile
    return getattr(model, "module", model)  # DDP


def _to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


def _batch_len(batch: dict) -> int:
    return len(next(v for v in batch.values() if torch.is_tensor(v)))


class _Batches:
    """Endless micro-batches over epochs of `batches`, keeping the data position a checkpoint
    stores: (epoch, global samples consumed in it)."""

    def __init__(self, batches: Iterable, world_size: int, epoch: int = 0, samples: int = 0):
        self.batches, self.world_size = batches, world_size
        self.epoch, self.samples = epoch, samples
        if hasattr(batches, "set_epoch"):
            batches.set_epoch(epoch)
        if samples and hasattr(batches, "skip_samples"):
            batches.skip_samples(samples)
            self.iterator = iter(batches)
        else:  # a plain iterable: replay the epoch up to the position (exact if it is deterministic)
            self.iterator = iter(batches)
            skipped = 0
            while skipped < samples:
                skipped += _batch_len(next(self.iterator)) * world_size

    def __next__(self) -> dict:
        for _ in range(2):
            try:
                batch = next(self.iterator)
                self.samples += _batch_len(batch) * self.world_size
                return batch
            except StopIteration:
                self.epoch, self.samples = self.epoch + 1, 0
                if hasattr(self.batches, "set_epoch"):
                    self.batches.set_epoch(self.epoch)
                self.iterator = iter(self.batches)
        raise UserError("the training data yields no batches")


def _no_sync(forward_model: nn.Module):
    """DDP's no_sync, also through a torch.compile wrapper."""
    return getattr(forward_model, "_orig_mod", forward_model).no_sync()


class _Interval:
    """Sums over the micro-batches since the last log line, kept on the device until logged."""

    def __init__(self, device: torch.device):
        self.device = device
        self.reset()

    def reset(self) -> None:
        self.sums: dict[str, list] = {}
        self.terms: set[str] = set()
        self.sequences = 0
        self.grad_norms: list[float] = []
        self.learning_rate = 0.0

    def add(self, terms: list[str], stats: dict, sequences: int) -> None:
        """terms: the names of the loss terms among the stats (their sum is logged as "loss")."""
        self.terms.update(terms)
        for name, (total, count) in stats.items():
            total = torch.as_tensor(total, device=self.device).detach().float()
            count = torch.as_tensor(count, device=self.device).float()
            previous = self.sums.get(name)
            self.sums[name] = (
                [total, count] if previous is None else [previous[0] + total, previous[1] + count]
            )
        self.sequences += sequences

    def add_step(self, grad_norm: float | None, learning_rate: float) -> None:
        if grad_norm is not None:
            self.grad_norms.append(grad_norm)
        self.learning_rate = learning_rate

    def reduce(self, seconds: float) -> dict:
        names = sorted(self.sums)  # the same order on every rank
        values = [v for name in names for v in self.sums[name]]
        values.append(torch.tensor(float(self.sequences), device=self.device))
        reduced = all_reduce_sum(torch.stack(values)).tolist()
        figures = {name: reduced[2 * i] / max(reduced[2 * i + 1], 1e-12) for i, name in enumerate(names)}
        # The loss: each term's mean over all its items of the interval (exactly the optimizer's
        # objective when an interval is one step), summed.
        figures["loss"] = sum(figures.get(name, 0.0) for name in sorted(self.terms))
        sequences = int(reduced[-1])
        figures["learning_rate"] = self.learning_rate
        figures["grad_norm"] = sum(self.grad_norms) / len(self.grad_norms) if self.grad_norms else math.nan
        figures["sequences_per_second"] = sequences / seconds if seconds > 0 else 0.0
        figures["sequences"] = sequences
        self.reset()
        return figures


def _rng_state() -> dict:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int, rank: int = 0) -> None:
    """Seed Python, NumPy and torch (all devices) from (seed, rank)."""
    value = int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)


def _open_live(live_dir: Path | None, step: int, resumed: bool):
    """DVCLive in `live_dir`: a resumed run goes on with the curves it finds there (dvc.yaml
    keeps the folder: `persist: true`), a fresh run clears them."""
    if live_dir is None:
        return None
    from dvclive import Live

    live_dir = Path(live_dir)
    if resumed:
        if step > 0 and not (live_dir / "plots" / "metrics").is_dir():
            log.warning("%s: the curves of the steps before %d are gone (was the folder removed?); "
                        "they start at step %d", live_dir, step, step + 1)  # fmt: skip
        truncate_live_history(live_dir, step)
    live = Live(dir=str(live_dir), resume=resumed, dvcyaml=None, save_dvc_exp=False, report=None)
    live.step = step
    return live


def truncate_live_history(live_dir: Path, step: int) -> None:
    """Drop the rows of DVCLive's curves (plots/metrics/**/*.tsv) after `step`, logged by a run killed
    after the checkpoint of `step` (the resumed run logs them again), and a row it was killed while
    writing, so the curves hold each step once. A summary (metrics.json) it was killed while writing
    goes too: DVCLive rewrites it in place at every step, and the resumed run's next step writes it."""
    summary = live_dir / "metrics.json"
    try:
        json.loads(summary.read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except ValueError:  # not JSON: cut off
        summary.unlink()
    for tsv in sorted((live_dir / "plots" / "metrics").rglob("*.tsv")):
        lines = tsv.read_text(encoding="utf-8").splitlines(keepends=True)
        header = lines[0].rstrip("\r\n").split("\t") if lines and lines[0].endswith("\n") else []
        if "step" not in header:  # empty, or killed while writing its header: nothing to keep
            tsv.unlink()
            continue
        column = header.index("step")
        kept = [lines[0]]
        for line in lines[1:]:
            fields = line.rstrip("\r\n").split("\t")
            whole = (
                line.endswith("\n")
                and len(fields) == len(header)
                and fields[column].isascii()
                and fields[column].isdigit()
            )
            if whole and int(fields[column]) <= step:
                kept.append(line)
        if kept != lines:
            with atomic_file(tsv) as temp:
                temp.write_text("".join(kept), encoding="utf-8")
