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


class UserError(Exception):
    """An expected failure with a message that names the file (or param) and the fix."""


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


def run_main(main: Callable[[], object], log_level: int = logging.INFO) -> None:
    """Run a command's main(): a UserError, a full disk or a folder it may not write becomes one
    line on stderr and exit status 1, Ctrl-C exit status 130; anything else is a bug and keeps its traceback."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    _stop_on_preemption_signals()
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except PermissionError as error:  # a read-only data/ folder, or a file owned by another user
        # The folder, not the file: that is usually a temporary name (bert.atomic) the user never wrote.
        folder = os.path.dirname(error.filename or "") or "."
        print(
            f"error: {folder}: permission denied; make the folder writable for you (chmod u+rwx {folder}) "
            "or run as its owner, then run again",
            file=sys.stderr,
        )
        sys.exit(1)
    except Exception as error:
        if not is_disk_full(error):
            raise
        where = f" {error.filename}" if getattr(error, "filename", None) else ""
        print(
            f"error: disk full while writing{where} ({error}); free space and run the stage again",
            file=sys.stderr,
        )
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
