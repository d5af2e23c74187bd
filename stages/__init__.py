"""Thin entry points, one per DVC stage: parse params, call `bert`, write outputs."""

import logging
import sys
from collections.abc import Callable

from bert.errors import UserError, is_disk_full


def run_stage(main: Callable[[], None]) -> None:
    """Run a stage's main(); a UserError or a full disk becomes one line on stderr and exit status 1."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except Exception as error:  # disk full is expected too: one line instead of a traceback
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
