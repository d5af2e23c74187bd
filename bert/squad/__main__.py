"""python -m bert.squad DATA_FILE PRED_FILE [--na-prob-file F]: the official SQuAD evaluation."""

import logging

from bert.errors import run_main
from bert.squad.evaluation import main

if __name__ == "__main__":
    run_main(main, logging.WARNING)
