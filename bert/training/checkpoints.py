"""Training checkpoints: the files, and which one a run resumes from.

A checkpoint is <checkpoint_dir>/step-<step>.pt, one torch.save'd dict (bert.training.loop writes
it): step, model, optimizer, scheduler, scaler (the fp16 grad scaler), rng (the Python, NumPy and
torch RNG states of every rank), data ({epoch, samples}: the position in the data), totals (the
run's running figures), max_steps, signature, description (what the signature hashes) and execution
(below). Only the newest keep_last files are kept: a run prunes its own files only, since a run that
does not continue the checkpoints it finds first moves them to previous-<signature>/.
A file that cannot be read back (a disk that lied, a truncated copy) is renamed to <name>.corrupt
(<name>.<N>.corrupt when that exists: each is kept), which no glob here matches, and the run resumes from the newest readable one
(`newest_readable_checkpoint`).

Two records decide whether a run resumes a checkpoint:
- the run signature (`run_signature`): what the run computes, a hash of its description (the data
  and initial weights as the stage describes them, and the recipe under "recipe", `described_recipe`).
  Checkpoints of another signature are never resumed, but for a pretraining checkpoint written
  before runs were built by bert.training.run, whose description named the recipe's fields flat
  beside the data: it is the same run when its description, read in today's form
  (`in_todays_form`), has this run's signature;
- the execution record: how it computes (the code, precision, compile, world size, ...). Another
  one resumes an unfinished run but trains a finished one again (see `checkpoint_to_resume`).
"""

import dataclasses
import hashlib
import json
import logging
import os
import pickle
import sys
from pathlib import Path

import torch

from bert.atomic import atomic_file
from bert.errors import UserError
from bert.training.collectives import barrier, broadcast_from_main, gather_to_all, rank_and_world_size
from bert.training.recipe import Recipe

log = logging.getLogger(__name__)

CHECKPOINT_GLOB = "step-*.pt"
# What torch.load raises on a damaged file: a truncated zip (RuntimeError, or OSError EINVAL from
# its reader), an empty file (EOFError), overwritten pickle bytes (UnpicklingError), a zip missing
# its records (KeyError).
UNREADABLE = (RuntimeError, OSError, EOFError, pickle.UnpicklingError, KeyError, ValueError)


def run_signature(described: dict) -> str:
    """A short, stable hash of what makes checkpoints belong to a run (bert.training.loop.RunRecord.signature)."""
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def described_recipe(recipe: Recipe, length_binning: bool) -> dict:
    """The recipe as a run's description holds it, the same for pretraining and fine-tuning: every
    field but the micro-batch size (resuming with another split of the global batch is allowed, on
    the same rows: bert.training.global_batch), and the data order's length_binning. Under the poly
    schedule the wsd fields mean nothing and are left out, as they were before they existed, so a
    checkpoint of then still resumes."""
    described = {k: v for k, v in dataclasses.asdict(recipe).items() if k != "micro_batch_size"}
    if recipe.schedule == "poly":
        for key in ("schedule", "decay_share", "decay_shape"):
            del described[key]
    return {**described, "length_binning": length_binning}


# The recipe's fields a pretraining checkpoint's description named flat, beside the data, before
# runs were built by bert.training.run; the global batch was "global_batch", and decay_power,
# schedule, length_binning and next_sentence were there only when not 0.5, poly, off and on.
_FLAT_RECIPE = ("optimizer", "learning_rate", "warmup_proportion", "weight_decay", "grad_clip", "seed")


def in_todays_form(described: dict | None) -> dict | None:
    """A checkpoint's description as today's code writes it: a pretraining checkpoint's of before
    (the recipe flat, `_FLAT_RECIPE`) with its recipe under "recipe" (`described_recipe`) and
    next_sentence always named; any other unchanged. Nothing is guessed: the old form left a
    field out only at the one value it then had."""
    if not described or "recipe" in described or "global_batch" not in described:
        return described
    rest = dict(described)
    recipe = {name: rest.pop(name) for name in _FLAT_RECIPE}
    recipe["global_batch_size"] = rest.pop("global_batch")
    recipe["decay_power"] = rest.pop("decay_power", 0.5)
    schedule = rest.pop("schedule", None)
    if schedule is not None:
        recipe.update(schedule=schedule["kind"], decay_share=schedule["decay_share"],
                      decay_shape=schedule["decay_shape"])  # fmt: skip
    recipe["length_binning"] = rest.pop("length_binning", False)
    return {**rest, "next_sentence": rest.get("next_sentence", True), "recipe": recipe}


def _same_run(state: dict, signature: str) -> bool:
    """Whether the checkpoint `state` belongs to the run of `signature`: its own signature, or
    (written before the description's form changed) its description read in today's form."""
    if state.get("signature", "") == signature:
        return True
    today = in_todays_form(state.get("description"))
    return today is not state.get("description") and run_signature(today) == signature


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


def newest_checkpoint(directory: str | Path | None) -> Path | None:
    """The newest checkpoint file of `directory`, as the disk has it now; None when there is none."""
    found = list_checkpoints(directory) if directory else []
    return found[-1] if found else None


def checkpoint_step(path: str | Path) -> int:
    """The step of a checkpoint file, read from its name (step-<step>.pt: save_checkpoint renames a
    whole file to it), so that naming a checkpoint does not load gigabytes."""
    return int(Path(path).stem.removeprefix("step-"))


def save_checkpoint(
    directory: str | Path, step: int, state: dict, keep_last: int, keep_step: int | None = None
) -> Path:
    """Write `state` as step-<step>.pt, complete or absent (a crash leaves the old files whole),
    then delete all but the newest `keep_last`, and but the file of `keep_step` (a warmup-stable-
    decay run's pre-decay checkpoint, the point to extend or branch the run from)."""
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
        if keep_step is None or checkpoint_step(old) != keep_step:
            old.unlink()
    return path


def load_checkpoint(path: str | Path) -> dict:
    # weights_only=False: the file holds Python and NumPy RNG states; it is our own output.
    return torch.load(path, map_location="cpu", weights_only=False)


def newest_readable_checkpoint(
    directory: str | Path, rank: int, at_most: int | None = None
) -> tuple[Path, dict] | None:
    """The newest checkpoint of `directory` (of step `at_most` or before, when given) that loads,
    and its state; None when there is none.
    Rank 0 chooses, moving each unreadable newer file aside with a warning, and tells the other
    ranks which file to load, with its step and SHA-256: every rank checks that it reads the
    same bytes (on a filesystem some node does not share, it would resume another step or none),
    and a rank that cannot stops the job with one line naming the file."""
    chosen, state = None, None
    if rank == 0:
        found = [p for p in list_checkpoints(directory) if at_most is None or checkpoint_step(p) <= at_most]
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
                aside = _corrupt_name(path)
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
    _, world_size = rank_and_world_size()
    if world_size == 1:
        return None if chosen is None else (chosen, state)
    choice = (chosen, state["step"], file_sha256(chosen)) if chosen is not None else None
    choice = broadcast_from_main(choice)
    problem = None
    if choice is not None and rank != 0:
        chosen, step, digest = choice
        try:
            seen = file_sha256(chosen)
            if seen is None:
                problem = "is missing"
            elif seen != digest:
                problem = f"holds other bytes (sha256 {seen[:12]}, rank 0 has {digest[:12]})"
            else:
                state = load_checkpoint(chosen)
        except UNREADABLE as error:
            problem = f"cannot be read ({str(error).split('. ')[0]})"
    problems = gather_to_all(problem)  # every rank learns of any rank's trouble, and stops too
    troubles = [f"on rank {other} it {trouble}" for other, trouble in enumerate(problems) if trouble]
    if troubles:
        raise UserError(
            f"{choice[0]}: rank 0 resumes from it (step {choice[1]}) but {', '.join(troubles)}; "
            "the checkpoint folder must be one filesystem that every node shares"
        )
    return None if choice is None else (Path(choice[0]), state)


def _corrupt_name(path: Path) -> Path:
    """Where an unreadable checkpoint goes: <name>.corrupt, or <name>.<N>.corrupt when an earlier
    file of that step went bad too (each is evidence of a fault, so none replaces another)."""
    aside, number = path.with_name(f"{path.name}.corrupt"), 1
    while aside.exists():
        number += 1
        aside = path.with_name(f"{path.name}.{number}.corrupt")
    return aside


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_to_resume(
    directory: str | Path,
    signature: str,
    execution: dict,
    max_steps: int,
    resume: bool,
    rank: int,
    description: dict | None = None,
) -> dict | None:
    """The newest readable checkpoint's state when the run should continue from it, else None.
    Checkpoints are never deleted by a run that does not continue them: they move, all of them,
    to <directory>/previous-<their signature>/ with one warning saying why (for another signature,
    the entries of `description`, what the signature hashes, that changed).

    Another signature (what is computed) never resumes. Another max_steps extends or shortens the
    run (the schedule follows the new total); a max_steps below the checkpoint's step is an error.
    Other execution settings (how: the code, precision, unpad, GPUs, ...) resume an unfinished run, so
    a long pretraining survives a bug fix or a switch of hardware or precision; a finished run is
    trained again instead: re-running it with new settings (`dvc exp run -S
    finetune.precision=bf16`, or `dvc repro` after an edit of bert/model/network.py) asks for the
    output of the new ones, and there is nothing left to resume."""
    directory = Path(directory)
    # Read even when resume is off: the old checkpoints' signature names the folder they move to.
    newest = newest_readable_checkpoint(directory, rank)
    if newest is not None and resume and _same_run(newest[1], signature):
        newest = _before_the_decay(directory, newest, max_steps, rank)
    state, reason = None, None
    if newest is not None:
        path, state = newest
        theirs, step = state.get("signature", ""), state["step"]
        changes = _changes(state.get("execution"), execution)
        if not resume:
            reason = "resume is off"
        elif not _same_run(state, signature):
            what = (
                _changes(in_todays_form(state.get("description")), description or {})
                or "not recorded in a checkpoint this old"
            )
            reason = f"written by a run with other params ({what})"
        elif step > max_steps:
            raise UserError(
                f"{path}: the run is at step {step}, past max_steps {max_steps}, and steps cannot be undone; "
                f"set max_steps to {step} or more, or move {directory} away to train the shorter run afresh"
            )
        elif changes and step >= max_steps:
            reason = f"the run finished with other settings ({changes}); training it again with the new ones"
        elif rank == 0:
            if changes:
                log.warning("%s: resuming a run begun with other settings (%s); it goes on with the new ones",
                            path, changes)  # fmt: skip
            if state.get("max_steps", max_steps) != max_steps:
                how = "extending the run from" if max_steps > state["max_steps"] else "shortening the run at"
                log.warning("%s: %s step %d: max_steps %d -> %d, the learning-rate schedule "
                            "recomputed for %d steps", path, how, step, state["max_steps"], max_steps, max_steps)  # fmt: skip
            log.info("resuming from %s", path)
        if reason:
            state = None
            if rank == 0:  # the other ranks have read the file (newest_readable_checkpoint waits for them)
                aside = _move_aside(directory, theirs or "unsigned")
                log.warning("%s: %s; its checkpoints moved to %s, starting afresh", path, reason, aside)
    return state


def _before_the_decay(directory: Path, newest: tuple[Path, dict], max_steps: int, rank: int):
    """The checkpoint a warmup-stable-decay run given another max_steps goes on from: its newest
    when that is still before the old decay (the stable rate is the same in both runs), else the
    pre-decay checkpoint (bert.training.loop keeps it), since the steps after it decayed for the old
    total. The decayed checkpoints then move to previous-<signature>-decayed/ (a resumed run must
    not find them again, nor rotate its own files away in their favour). Every rank takes the same
    branch: they all read the same state."""
    path, state = newest
    start = state.get("decay_start")
    if start is None or state.get("max_steps", max_steps) == max_steps or state["step"] <= start:
        return newest
    before = newest_readable_checkpoint(directory, rank, at_most=start)
    if rank == 0:
        aside = _move_aside(directory, f"{state['signature']}-decayed", after=start)
        if before is None:
            log.warning("%s: decayed for max_steps %d and no checkpoint of step %d or before is left "
                        "(moved to %s); starting afresh", path, state["max_steps"], start, aside)  # fmt: skip
        else:
            log.warning("%s: decayed for max_steps %d; going on from the pre-decay checkpoint %s instead "
                        "(the decayed ones moved to %s)", path, state["max_steps"], before[0], aside)  # fmt: skip
    barrier()  # no rank reads the folder again before rank 0 has moved the decayed files
    return before


def _move_aside(directory: Path, signature: str, after: int | None = None) -> Path:
    """Move every checkpoint file of `directory` (those of a step after `after`, when given)
    into a new folder previous-<signature>[-N]/."""
    aside = directory / f"previous-{signature}"
    number = 1
    while aside.exists():
        number += 1
        aside = directory / f"previous-{signature}-{number}"
    aside.mkdir()
    for path in list_checkpoints(directory):
        if after is None or checkpoint_step(path) > after:
            path.rename(aside / path.name)
    _fsync_directory(directory)
    return aside


def _changes(before: dict | None, now: dict) -> str:
    """What changed, readably: "precision fp32 -> bf16, unpad False -> True", "recipe.learning_rate
    0.001 -> 0.002", "files [train.json changed]", "manifest changed (sha256 1f2e3d4c5b6a -> ...)";
    "" when nothing changed or when the checkpoint predates the record."""
    if before is None:
        return ""
    return ", ".join(_changed(key, before.get(key), now.get(key)) for key in _changed_keys(before, now))


def _changed_keys(before: dict, now: dict) -> list:
    return [k for k in sorted(before.keys() | now.keys(), key=str) if before.get(k) != now.get(k)]


def _changed(key: str, old, new) -> str:
    """One changed entry of a run description or execution record, in words: a section by its
    changed keys, a list of files by the names that changed, a hash as its first 12 digits."""
    if key == "code":
        return "the code (bert/, stages/)"
    if isinstance(old, dict) and isinstance(new, dict):
        return ", ".join(_changed(f"{key}.{k}", old.get(k), new.get(k)) for k in _changed_keys(old, new))
    old_files, new_files = _files(old), _files(new)
    if old_files is not None and new_files is not None:
        changes = [
            f"{name} {'added' if name not in old_files else 'removed' if name not in new_files else 'changed'}"
            for name in _changed_keys(old_files, new_files)
        ]
        shown = changes[:3] + ([f"{len(changes) - 3} more"] if len(changes) > 3 else [])
        return f"{key} [{', '.join(shown) or 'reordered'}]"
    if _is_hash(old) or _is_hash(new):
        old, new = ("none" if value is None else _short(value) for value in (old, new))
        return f"{key} changed (sha256 {old} -> {new})"
    return f"{key} {_short(old)} -> {_short(new)}"


def _files(value) -> dict | None:
    """A description's list of files, [(name, size or hash), ...], as {name: size or hash}; None
    for anything else."""
    if not isinstance(value, list | tuple) or not value:
        return None
    if all(
        isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str) for entry in value
    ):
        return dict(value)
    return None


def _is_hash(value) -> bool:
    return isinstance(value, str) and len(value) >= 32 and all(c in "0123456789abcdef" for c in value)


def _short(value) -> str:
    """A value for a log line: a hash by its first 12 digits, anything long cut to 40 characters."""
    if _is_hash(value):
        return value[:12]
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."
