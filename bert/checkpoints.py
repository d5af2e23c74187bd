"""Training checkpoints: the files, and which one a run resumes from.

A checkpoint is <checkpoint_dir>/step-<step>.pt, one torch.save'd dict (bert.training writes
it): step, model, optimizer, scheduler, scaler (the fp16 grad scaler), rng (the Python, NumPy and
torch RNG states of every rank), data ({epoch, samples}: the position in the data), totals (the
run's running figures), signature and execution (below). Only the newest keep_last files are kept.
A file that cannot be read back (a disk that lied, a truncated copy) is renamed to <name>.corrupt,
which no glob here matches, and the run resumes from the newest readable one
(`newest_readable_checkpoint`).

Two records decide whether a run resumes a checkpoint:
- the run signature (`run_signature`): what the run computes (params, data, initial weights).
  Checkpoints of another signature are never resumed;
- the execution record: how it computes (the code, precision, compile, world size, ...). Another
  one resumes an unfinished run but trains a finished one again (see `checkpoint_to_resume`).
"""

import hashlib
import json
import logging
import os
import pickle
import sys
from pathlib import Path

import torch

from bert.atomic import atomic_file
from bert.distributed import barrier, broadcast_from_main
from bert.errors import UserError

log = logging.getLogger(__name__)

CHECKPOINT_GLOB = "step-*.pt"
# What torch.load raises on a damaged file: a truncated zip (RuntimeError, or OSError EINVAL from
# its reader), an empty file (EOFError), overwritten pickle bytes (UnpicklingError), a zip missing
# its records (KeyError).
UNREADABLE = (RuntimeError, OSError, EOFError, pickle.UnpicklingError, KeyError, ValueError)


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


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Checkpoint files of `directory`, oldest first."""
    return sorted(Path(directory).glob(CHECKPOINT_GLOB))


def save_checkpoint(directory: str | Path, step: int, state: dict, keep_last: int) -> Path:
    """Write `state` as step-<step>.pt, complete or absent (a crash leaves the old files whole),
    then delete all but the newest `keep_last`."""
    directory = Path(directory)
    path = directory / f"step-{step:08d}.pt"
    for stale in directory.glob(f".{CHECKPOINT_GLOB}.tmp-*"):  # left by a save of any step that was killed
        stale.unlink(missing_ok=True)
    with atomic_file(path) as temp:
        try:
            with open(temp, "wb") as file:
                torch.save(state, file)
                file.flush()
                os.fsync(file.fileno())
        except (
            OSError,
            RuntimeError,
        ) as error:  # torch.save reports a failed write (disk full) as RuntimeError
            raise UserError(
                f"{path}: cannot write checkpoint ({error}); the previous checkpoints are intact "
                "(check the free disk space and permissions there)"
            ) from None
    _fsync_directory(directory)  # the rename itself survives a power cut
    for old in list_checkpoints(directory)[:-keep_last]:
        old.unlink()
    return path


def load_checkpoint(path: str | Path) -> dict:
    # weights_only=False: the file holds Python and NumPy RNG states; it is our own output.
    return torch.load(path, map_location="cpu", weights_only=False)


def newest_readable_checkpoint(directory: str | Path, rank: int) -> tuple[Path, dict] | None:
    """The newest checkpoint of `directory` that loads, and its state; None when there is none.
    Rank 0 chooses, moving each unreadable newer file aside with a warning, and tells the other
    ranks which file to load, so all of them resume the same step."""
    chosen, state = None, None
    if rank == 0:
        found = list_checkpoints(directory)
        for path in reversed(found):
            try:
                state = load_checkpoint(path)
                chosen = path
                break
            except UNREADABLE as error:
                if isinstance(error, PermissionError):  # a whole file we may not read: not ours to move
                    raise UserError(
                        f"{path}: cannot read the checkpoint ({error}); check its permissions"
                    ) from None
                aside = path.with_name(path.name + ".corrupt")
                path.replace(aside)
                reason = str(error).split(". ")[0]  # torch's zip errors go on with advice for its developers
                log.warning(
                    "%s: unreadable (%s); moved aside to %s, trying an older checkpoint",
                    path,
                    reason,
                    aside.name,
                )
        if found and chosen is None:
            log.warning("%s: no readable checkpoint left; starting afresh", directory)
    chosen = broadcast_from_main(chosen)
    if chosen is None:
        return None
    return chosen, state if rank == 0 else load_checkpoint(chosen)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_to_resume(
    directory: str | Path, signature: str, execution: dict, max_steps: int, resume: bool, rank: int
) -> dict | None:
    """The newest readable checkpoint's state when the run should continue from it, else None
    (and the old checkpoints are removed). Another signature (what is computed) never resumes. Other
    execution settings (how: the code, precision, unpad, GPUs, ...) resume an unfinished run, so
    a long pretraining survives a bug fix or a switch of hardware or precision; a finished run is
    trained again instead: re-running it with new settings (`dvc exp run -S
    finetune.precision=bf16`, or `dvc repro` after an edit of bert/modeling.py) asks for the
    output of the new ones, and there is nothing left to resume."""
    directory = Path(directory)
    newest = newest_readable_checkpoint(directory, rank) if resume else None
    state = None
    if newest is not None:
        path, state = newest
        changes = _changes(state.get("execution"), execution)
        if state.get("signature", "") != signature:
            log.warning("%s: written by a run with other params; starting afresh", path)
            state = None
        elif changes and state["step"] >= max_steps:
            log.warning(
                "%s: the run finished with other settings (%s); training it again with the new ones",
                path, changes,
            )  # fmt: skip
            state = None
        elif rank == 0 and changes:
            log.warning("%s: resuming a run begun with other settings (%s); it goes on with the new ones",
                        path, changes)  # fmt: skip
        elif rank == 0:
            log.info("resuming from %s", path)
    found = list_checkpoints(directory)
    if found and state is None:
        barrier()  # every rank has looked before rank 0 deletes
        if rank == 0:
            log.info("removing %d old checkpoints from %s", len(found), directory)
            for path in found:
                path.unlink(missing_ok=True)
    return state


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
