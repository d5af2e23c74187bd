"""The one exception type for mistakes a user can fix (bad input, bad params, missing files).

Stages catch it at the top (see `stages/__init__.py`) and print one line on stderr, with no
traceback, then exit non-zero. Anything else is a bug and keeps its traceback.
"""

import errno
import os


class UserError(Exception):
    """An expected failure with a message that names the file (or param) and the fix."""


DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def is_disk_full(error: BaseException) -> bool:
    """Did a write fail for lack of space (or a file-size limit)? OSError carries the errno; h5py,
    safetensors and pyarrow wrap it into other exceptions but keep the system's message."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
        return True
    return any(os.strerror(number) in str(error) for number in DISK_FULL_ERRNOS)
