"""Thin entry points, one per DVC stage: parse params, call `bert`, write outputs."""

import logging
import sys
from collections.abc import Callable

from bert.errors import UserError


def run_stage(main: Callable[[], None]) -> None:
    """Run a stage's main(); a UserError becomes one line on stderr and exit status 1."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        main()
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
