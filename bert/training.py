"""The training loop every stage uses (pretraining now, SQuAD fine-tuning too), and what it needs:
distributed set-up, checkpoints, and the pretraining loss.

One optimizer step:
  for each of grad_accum_steps micro-batches: forward under autocast, backward of loss/accum
      (DDP all-reduces gradients only on the last micro-batch: `no_sync` on the others);
  unscale (fp16), clip the global gradient norm to grad_clip, optimizer step (skipped when the
  gradients are not finite), scheduler step.
Every log_every steps the stats are summed over ranks and written to DVCLive under "train/"; every
save_every steps (and at the end) rank 0 writes one checkpoint file atomically.
"""

import contextlib
import hashlib
import json
import logging
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from bert.errors import UserError

log = logging.getLogger(__name__)

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
CHECKPOINT_GLOB = "step-*.pt"

# loss_fn(model, batch) -> (loss, stats); stats: name -> (total, count), logged as total/count
# summed over micro-batches and ranks (e.g. "mlm_accuracy": (correct, masked tokens)).
LossFn = Callable[[nn.Module, dict], tuple[torch.Tensor, dict[str, tuple]]]


@dataclass
class TrainConfig:
    max_steps: int
    grad_accum_steps: int = 1
    precision: str = "fp32"  # fp32 | bf16 | fp16
    grad_clip: float = 1.0  # max global gradient norm; 0 = no clipping
    log_every: int = 10
    save_every: int = 100
    keep_last: int = 2
    checkpoint_dir: str | Path | None = None
    resume: bool = True
    max_nonfinite_steps: int = 10
    compile: bool = False
    seed: int = 0
    live_dir: str | Path | None = None  # DVCLive folder; None = no DVCLive
    metrics_file: str | Path | None = None  # final figures as JSON
    run_signature: str = ""  # what the run computes: checkpoints of another signature are not resumed
    # How the run computes, besides precision, compile and the world size (say {"unpad": True}):
    # recorded in checkpoints with them, see _resume_state.
    execution: dict = field(default_factory=dict)
    progress: bool = True


def run_signature(described: dict) -> str:
    """A short, stable hash of what makes checkpoints belong to a run (TrainConfig.run_signature)."""
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def file_sha256(path: str | Path) -> str | None:
    """The SHA-256 of a file, read in blocks (weights can be GBs), or None when it is missing: for
    run signatures, which must change whenever the data or the initial weights do."""
    path = Path(path)
    if not path.is_file():
        return None
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


# ---------------------------------------------------------------------------------------------
# Distributed


@dataclass
class Distributed:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup_distributed(backend: str = "auto") -> Distributed:
    """Join the process group torchrun set up (RANK/WORLD_SIZE in the environment), or run alone.
    backend auto: nccl on CUDA, gloo on CPU. Each process uses the GPU of its LOCAL_RANK."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        if backend == "auto":
            backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
        log.info("rank %d of %d on %s (%s)", rank, world_size, device, backend)
    return Distributed(rank, local_rank, world_size, device)


def torchrun_command(
    module_args: list[str], nproc_per_node: int, nnodes: int, rdzv_endpoint: str
) -> list[str]:
    """The command that starts `python -m <module_args>` on every GPU of every node."""
    return [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc-per-node", str(nproc_per_node),
        "--nnodes", str(nnodes),
        "--rdzv-backend", "c10d",
        "--rdzv-endpoint", rdzv_endpoint,
        "-m", *module_args,
    ]  # fmt: skip


def under_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or "LOCAL_RANK" in os.environ


def relaunch_with_torchrun(
    module_args: list[str], nproc_per_node: int, nnodes: int, rdzv_endpoint: str
) -> int:
    """Run this stage again under torchrun and return its exit status (non-zero when any rank
    failed: torchrun stops the other ranks and prints the failed rank's error)."""
    command = torchrun_command(module_args, nproc_per_node, nnodes, rdzv_endpoint)
    log.info("launching %d x %d processes: %s", nnodes, nproc_per_node, " ".join(command))
    return subprocess.run(command).returncode


def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ---------------------------------------------------------------------------------------------
# Checkpoints


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Checkpoint files of `directory`, oldest first."""
    return sorted(Path(directory).glob(CHECKPOINT_GLOB))


def save_checkpoint(directory: str | Path, step: int, state: dict, keep_last: int) -> Path:
    """Write `state` as step-<step>.pt: temp file, fsync, rename (a crash leaves the old files
    whole), then delete all but the newest `keep_last`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"step-{step:08d}.pt"
    temp = directory / f".{path.name}.tmp-{os.getpid()}"
    for stale in directory.glob(f".{CHECKPOINT_GLOB}.tmp-*"):  # left by a save that was killed
        stale.unlink(missing_ok=True)
    try:
        with open(temp, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write (disk full) as RuntimeError
        temp.unlink(missing_ok=True)
        raise UserError(
            f"{path}: cannot write checkpoint ({error}); the previous checkpoints are intact "
            "(check the free disk space and permissions there)"
        ) from None
    finally:
        temp.unlink(missing_ok=True)
    _fsync_directory(directory)
    for old in list_checkpoints(directory)[:-keep_last]:
        old.unlink()
    return path


def load_checkpoint(path: str | Path) -> dict:
    # weights_only=False: the file holds Python and NumPy RNG states; it is our own output.
    return torch.load(path, map_location="cpu", weights_only=False)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


# ---------------------------------------------------------------------------------------------
# The loop


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


def _reduce(values: torch.Tensor) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(values)
    return values


def train(
    model: nn.Module,
    batches: Iterable[dict],
    loss_fn: LossFn,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    config: TrainConfig,
) -> dict:
    """Train `model` (already on its device) for config.max_steps optimizer steps and return the
    final figures (also written to config.metrics_file). `batches` yields dicts of tensors (one
    rank's micro-batches); it is iterated again for each epoch, told the epoch through
    `set_epoch(epoch)` and a resume position through `skip_samples(n)` when it has them. Resumes
    from the newest checkpoint in config.checkpoint_dir when config.resume. For a bit-exact
    resume, `batches` must not draw from torch's global RNG (give a DataLoader a `generator`)."""
    if config.precision not in PRECISIONS:
        raise ValueError(f"precision {config.precision!r}: allowed {', '.join(PRECISIONS)}")
    rank, world_size = _world()
    is_main = rank == 0
    device = next(model.parameters()).device
    if (
        device.type == "cuda"
        and config.precision == "fp32"
        and torch.cuda.get_device_capability(device)[0] >= 8
    ):
        torch.backends.cuda.matmul.allow_tf32 = True  # TF32 tensor cores: fp32 range, ~10-bit mantissa
        torch.backends.cudnn.allow_tf32 = True
    amp_dtype = PRECISIONS[config.precision]
    scaler = torch.amp.GradScaler(device.type, enabled=config.precision == "fp16")

    state, execution = None, None
    if config.checkpoint_dir:
        # Once, here: a resuming process computes it at the same point, with the same modules imported.
        execution = _execution(config, world_size)
        state = _resume_state(config, rank, execution)
    step, epoch, samples = 0, 0, 0
    totals = {"seconds": 0.0, "sequences": 0, "skipped_steps": 0, "first_loss": None, "last": {}}
    if state is not None:
        _unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        scaler.load_state_dict(state["scaler"])
        step, epoch, samples = state["step"], state["data"]["epoch"], state["data"]["samples"]
        totals = state["totals"]
        log.info("resumed from step %d (epoch %d, sample %d of it)", step, epoch, samples)
        rngs = state["rng"]
        if len(rngs) == world_size:
            _set_rng_state(rngs[rank])
        else:  # another world size: data and weights are exact, dropout draws cannot be
            seed_everything(config.seed + step, rank)
    else:
        seed_everything(config.seed, rank)

    forward_model = model
    if world_size > 1:
        device_ids = [device.index] if device.type == "cuda" else None
        forward_model = nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    if config.compile:
        forward_model = torch.compile(forward_model)
    forward_model.train()

    live = _open_live(config, step, resumed=state is not None) if is_main else None
    progress = tqdm(
        total=config.max_steps, initial=step, disable=not (is_main and config.progress), desc="train"
    )
    data = _Batches(batches, world_size, epoch, samples)
    nonfinite_in_row = 0
    interval = _Interval(device)
    started = time.perf_counter()
    interval_started = started
    stepped_in_run = 0

    while step < config.max_steps:
        step_loss = torch.zeros((), device=device)
        for micro in range(config.grad_accum_steps):
            batch = _to_device(next(data), device)
            last = micro == config.grad_accum_steps - 1
            sync = contextlib.nullcontext() if last or world_size == 1 else _no_sync(forward_model)
            with sync:
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss, stats = loss_fn(forward_model, batch)
                scaler.scale(loss / config.grad_accum_steps).backward()
            step_loss += loss.detach().float()
            interval.add(loss.detach(), stats, _batch_len(batch))

        if scaler.is_enabled():
            scaler.unscale_(optimizer)
        max_norm = config.grad_clip if config.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        # One small all-reduce of the step's loss, so every rank takes the same skip decision.
        mean_loss, norm = _reduce(
            torch.stack([step_loss / config.grad_accum_steps / world_size, grad_norm.float()])
        ).tolist()
        norm /= world_size  # the gradients were all-reduced already: every rank has the same norm
        loss_finite = math.isfinite(mean_loss)
        if scaler.is_enabled():
            scale = scaler.get_scale()
            scaler.step(optimizer)  # skips the update itself when the gradients overflowed
            scaler.update()
            skipped = scaler.get_scale() < scale
        else:
            skipped = not (loss_finite and math.isfinite(norm))
            if not skipped:
                optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        learning_rate = scheduler.get_last_lr()[0]
        scheduler.step()
        step += 1
        stepped_in_run += 1
        progress.update(1)
        totals["skipped_steps"] += int(skipped)
        if skipped:
            log.warning(
                "step %d: non-finite %s, update skipped", step, "gradients" if loss_finite else "loss"
            )
        nonfinite_in_row = (
            0 if loss_finite and not (skipped and not scaler.is_enabled()) else nonfinite_in_row + 1
        )
        if totals["first_loss"] is None and loss_finite:
            totals["first_loss"] = mean_loss
        if nonfinite_in_row >= config.max_nonfinite_steps:
            newest = list_checkpoints(config.checkpoint_dir)[-1:] if config.checkpoint_dir else []
            progress.close()  # end the bar's line: the error must be the last line, on its own
            raise UserError(
                f"the loss or its gradients were not finite for {nonfinite_in_row} steps in a row (up to step {step}); stopped. "
                f"Last good checkpoint: {newest[0] if newest else 'none'}. Lower the learning rate, "
                "use bf16 instead of fp16, or raise max_nonfinite_steps"
            )
        interval.add_step(norm if math.isfinite(norm) else None, learning_rate)

        if step % config.log_every == 0 or step == config.max_steps:
            now = time.perf_counter()
            figures = interval.reduce(now - interval_started)
            interval_started = now
            totals["sequences"] += figures.pop("sequences")
            totals["last"] = figures
            if is_main:
                progress.set_postfix(loss=f"{figures['loss']:.4f}", lr=f"{learning_rate:.2e}")
                if live is not None:
                    live.step = step
                    for name, value in figures.items():
                        live.log_metric(f"train/{name}", value)
                    live.next_step()

        # A checkpoint only after a good step, so the newest one is always a state to go back to.
        due = step % config.save_every == 0 or step == config.max_steps
        if config.checkpoint_dir and due and nonfinite_in_row == 0:
            totals["seconds"] += time.perf_counter() - started
            started = time.perf_counter()
            try:
                _save(
                    config,
                    step,
                    model,
                    optimizer,
                    scheduler,
                    scaler,
                    data,
                    totals,
                    rank,
                    world_size,
                    execution,
                )
            except UserError:  # e.g. disk full
                progress.close()
                raise

    totals["seconds"] += time.perf_counter() - started
    progress.close()
    summary = {
        **totals["last"],
        "first_loss": totals["first_loss"],
        "steps": step,
        "sequences_per_second": totals["sequences"] / totals["seconds"] if totals["seconds"] else 0.0,
        "seconds": totals["seconds"],
        "skipped_steps": totals["skipped_steps"],
    }
    summary.pop("learning_rate", None)
    if live is not None:
        live.end()
    if is_main and config.metrics_file:
        _write_json(Path(config.metrics_file), summary)
    log.info("trained %d steps (%d in this run): %s", step, stepped_in_run, json.dumps(summary))
    return summary


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
        self.sequences = 0
        self.grad_norms: list[float] = []
        self.learning_rate = 0.0

    def add(self, loss: torch.Tensor, stats: dict, sequences: int) -> None:
        for name, (total, count) in {"loss": (loss, 1), **stats}.items():
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
        reduced = _reduce(torch.stack(values)).tolist()
        figures = {name: reduced[2 * i] / max(reduced[2 * i + 1], 1e-12) for i, name in enumerate(names)}
        sequences = int(reduced[-1])
        figures["learning_rate"] = self.learning_rate
        figures["grad_norm"] = sum(self.grad_norms) / len(self.grad_norms) if self.grad_norms else math.nan
        figures["sequences_per_second"] = sequences / seconds if seconds > 0 else 0.0
        figures["sequences"] = sequences
        self.reset()
        return figures


def source_fingerprint() -> str:
    """A hash of the source of every module of this project (bert.*, stages.*) the process has
    imported: taken when training starts, the code a run trains with (so the modules the loop
    runs are imported at module level, not lazily)."""
    digest = hashlib.sha256()
    for name, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and (name in ("bert", "stages") or name.startswith(("bert.", "stages."))):
            digest.update(name.encode())
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def _execution(config: TrainConfig, world_size: int) -> dict:
    return {
        "code": source_fingerprint(),
        "precision": config.precision,
        "compile": config.compile,
        "world_size": world_size,
        "grad_accum_steps": config.grad_accum_steps,
        **config.execution,
    }


def _changes(before: dict | None, now: dict) -> str:
    """ "precision fp32 -> bf16, unpad False -> True"; "" when nothing changed or when the
    checkpoint predates the record."""
    if before is None:
        return ""
    changed = [k for k in sorted(before.keys() | now.keys()) if before.get(k) != now.get(k)]
    return ", ".join(
        "the code (bert/, stages/)" if k == "code" else f"{k} {before.get(k)} -> {now.get(k)}"
        for k in changed
    )


def _resume_state(config: TrainConfig, rank: int, execution: dict) -> dict | None:
    """The newest checkpoint's state when the run should continue from it, else None (and the
    old checkpoints are removed). Another signature (what is computed) never resumes. Other
    execution settings (how: the code, precision, unpad, GPUs, ...) resume an unfinished run, so
    a long pretraining survives a bug fix or a switch of hardware or precision; a finished run is
    trained again instead: re-running it with new settings (`dvc exp run -S
    finetune.precision=bf16`, or `dvc repro` after an edit of bert/modeling.py) asks for the
    output of the new ones, and there is nothing left to resume."""
    directory = Path(config.checkpoint_dir)
    found = list_checkpoints(directory)
    state = None
    if found and config.resume:
        state = load_checkpoint(found[-1])
        changes = _changes(state.get("execution"), execution)
        if state.get("signature", "") != config.run_signature:
            log.warning("%s: written by a run with other params; starting afresh", found[-1])
            state = None
        elif changes and state["step"] >= config.max_steps:
            log.warning(
                "%s: the run finished with other settings (%s); training it again with the new ones",
                found[-1], changes,
            )  # fmt: skip
            state = None
        elif rank == 0 and changes:
            log.warning("%s: resuming a run begun with other settings (%s); it goes on with the new ones",
                        found[-1], changes)  # fmt: skip
        elif rank == 0:
            log.info("resuming from %s", found[-1])
    if found and state is None:
        if dist.is_available() and dist.is_initialized():
            dist.barrier()  # every rank has looked before rank 0 deletes
        if rank == 0:
            log.info("removing %d old checkpoints from %s", len(found), directory)
            for path in found:
                path.unlink(missing_ok=True)
    return state


def _save(
    config, step, model, optimizer, scheduler, scaler, data: _Batches, totals, rank, world_size, execution
) -> None:
    rng = _rng_state()
    if world_size > 1:
        rngs = [None] * world_size
        dist.all_gather_object(rngs, rng)
    else:
        rngs = [rng]
    if rank != 0:
        return
    state = {
        "step": step,
        "model": _unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": rngs,
        "data": {"epoch": data.epoch, "samples": data.samples},
        "totals": totals,
        "signature": config.run_signature,
        "execution": execution,  # with the world size
    }
    path = save_checkpoint(config.checkpoint_dir, step, state, config.keep_last)
    log.info("step %d: checkpoint %s", step, path)


def _open_live(config: TrainConfig, step: int, resumed: bool):
    if config.live_dir is None:
        return None
    from dvclive import Live

    if resumed:
        _truncate_live_history(Path(config.live_dir), step)
    live = Live(dir=str(config.live_dir), resume=resumed, dvcyaml=None, save_dvc_exp=False, report=None)
    live.step = step
    return live


def _truncate_live_history(live_dir: Path, step: int) -> None:
    """Drop the rows a killed run logged after the checkpoint it resumes from, so the curves
    have each step once."""
    for tsv in (live_dir / "plots" / "metrics").rglob("*.tsv"):
        lines = tsv.read_text().splitlines(keepends=True)
        if not lines:
            continue
        column = lines[0].rstrip("\n").split("\t").index("step")
        kept = [lines[0]] + [line for line in lines[1:] if int(line.split("\t")[column]) <= step]
        if len(kept) != len(lines):
            tsv.write_text("".join(kept))


def _write_json(path: Path, values: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(values, indent=2, sort_keys=True) + "\n")
    os.replace(temp, path)


# ---------------------------------------------------------------------------------------------
# Pretraining


def pretraining_loss(model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict]:
    """BertForPreTraining's MLM + NSP loss and the stats the pretraining logs show."""
    out = model(**batch)
    with torch.no_grad():
        mlm_correct = (out.mlm_logits.argmax(-1) == out.mlm_labels).sum()
        nsp_correct = (out.nsp_logits.argmax(-1) == batch["next_sentence_labels"].view(-1)).sum()
        mask = batch["attention_mask"]
        padded_slots = mask.numel() - mask.sum()
    stats = {
        "mlm_loss": (out.mlm_loss, 1),
        "nsp_loss": (out.nsp_loss, 1),
        "mlm_accuracy": (mlm_correct, out.mlm_labels.numel()),
        "nsp_accuracy": (nsp_correct, out.nsp_logits.shape[0]),
        # share of the token slots the model ran that held padding (see pretraining_loader)
        "padding_waste": (padded_slots, mask.numel()),
    }
    return out.loss, stats
