"""The one exception type for mistakes a user can fix (bad input, bad params, missing files).

Every command (each stage and each `python -m bert.*` tool) runs through `run_main`, which catches it and print one line on stderr, with no
traceback, then exit non-zero. Anything else is a bug and keeps its traceback.
"""

import errno
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path


class UserError(Exception):
    """An expected failure with a message that names the file (or param) and the fix."""


class SettingsError(UserError):
    """A rule across the fields of a settings type broken (a recipe's warm-up past its decay, bands
    that do not divide num_perm). `naming(prefix)` is the line with each field named after
    `prefix`, so that the params decoder names them as params.yaml writes them
    ("pretrain.phase1.warmup_proportion"); the message alone is `where: ` and the bare field names."""

    def __init__(self, where: str, naming: Callable[[str], str]):
        super().__init__(f"{where}: {naming('')}")
        self.naming = naming


def first_line(error: BaseException) -> str:
    """The first line of a library's message (torch's run to paragraphs); its type when it has none."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def is_disk_full(error: BaseException) -> bool:
    """Did a write fail for lack of space (or a file-size limit)? OSError carries the errno; h5py,
    safetensors and pyarrow wrap it into other exceptions but keep the system's message."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
        return True
    return any(os.strerror(number) in str(error) for number in DISK_FULL_ERRNOS)


# Writes the system refuses, whoever runs (EROFS: root too) or for this user (EACCES, EPERM).
UNWRITABLE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}


def shown_path(filename: str | os.PathLike) -> str:
    """A path as the user knows it: cut before its first hidden part, the temporary or staging name
    of a write in progress (bert.atomic's `.<name>.tmp-...`, a download's `.partial/`), which the
    user never wrote; "." when nothing is left."""
    parts = Path(filename).parts
    hidden = next(
        (i for i, part in enumerate(parts) if part.startswith(".") and part not in (".", "..")), None
    )
    if hidden is None:
        return str(filename)
    return str(Path(*parts[:hidden])) if hidden else "."


def unwritable_line(error: BaseException) -> str | None:
    """For a write the system refused (a read-only file system, a folder this user may not write):
    one line naming the folder as the user knows it (not a temporary name inside it) and the fix.
    None for any other error. h5py, safetensors and pyarrow wrap OSError into their own exceptions
    but keep the system's message: a read-only file system is told by it, without the folder."""
    number = error.errno if isinstance(error, OSError) else None
    if number not in UNWRITABLE_ERRNOS:
        if os.strerror(errno.EROFS) not in str(error):
            return None
        return (
            f"cannot write an output ({first_line(error)}): its folder is on a read-only file system; "
            "remount it read-write (or run in a writable copy of the project), then run again"
        )
    filename = os.fspath(error.filename) if isinstance(error.filename, str | os.PathLike) else ""
    folder = shown_path(os.path.dirname(filename) or ".") if isinstance(filename, str) else "."
    if number == errno.EROFS:
        return (
            f"{folder}: read-only file system, where the command writes its output; remount it read-write "
            "(or run in a writable copy of the project), then run again"
        )
    why = "permission denied" if number == errno.EACCES else "operation not permitted"
    return (
        f"{folder}: {why}; make the folder writable for you (chmod u+rwx {folder}) or run as its owner, "
        "then run again"
    )


def run_main(main: Callable[[], object], log_level: int = logging.INFO) -> None:
    """Run a command's main(): a UserError, a full disk or a folder it may not write (read-only,
    or another user's) becomes one line on stderr and exit status 1, Ctrl-C exit status 130;
    anything else is a bug and keeps its traceback."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    _stop_on_preemption_signals()
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except Exception as error:
        line = unwritable_line(error)
        if line is None and is_disk_full(error):
            where = f" {error.filename}" if getattr(error, "filename", None) else ""
            line = f"disk full while writing{where} ({error}); free space and run the stage again"
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


def _stop_on_preemption_signals() -> None:
    """SIGTERM and SIGUSR1 stop a command (a training stage checkpoints first), even when it was
    started with them ignored: `dvc repro` is best run so (docs/operations.md, pre-emption), so
    that dvc waits for the stage instead of dying at once, and an ignored signal is inherited."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGUSR1):
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
