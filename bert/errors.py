"""The one exception type for mistakes a user can fix (bad input, bad params, missing files).

Stages catch it at the top (see `stages/__init__.py`) and print one line on stderr, with no
traceback, then exit non-zero. Anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """An expected failure with a message that names the file (or param) and the fix."""
