"""Thin entry points, one per DVC stage: parse params, call `bert`, write outputs. Each ends with
`run_main(main)` (bert/errors.py), which turns a user's mistake into one line on stderr.

Importing this package (every stage does, first) checks that the running python is the project's
environment: dvc.yaml's commands say `python`, so `dvc repro` without .venv active runs another one,
and the first stage died of `No module named 'tqdm'` with a traceback. find_spec only looks the
modules up (a few milliseconds), it imports none of them.
"""

import importlib.util
import sys
from pathlib import Path

# The modules of requirements.txt that bert/ and stages/ import (tests/test_params.py holds the two
# equal); not dvc (the command that runs the stages) nor the optional indexed_bzip2.
REQUIRED_MODULES = (
    "dask", "dvclive", "h5py", "nltk", "numpy", "pyarrow", "rensa", "safetensors", "tokenizers", "torch",
    "tqdm", "wikiextractor", "yaml",
)  # fmt: skip
VENV = Path(__file__).resolve().parents[1] / ".venv"


def _installed(name: str) -> bool:
    # A folder of that name in the repository (dvclive/, the curves) is a namespace package, not it.
    spec = importlib.util.find_spec(name)
    return spec is not None and spec.origin not in (None, "namespace")


def environment_problem() -> str | None:
    """One line saying that this python is not the project's environment, and the command that
    fixes it; None when every required module is there."""
    missing = [name for name in REQUIRED_MODULES if not _installed(name)]
    if not missing:
        return None
    if (VENV / "bin" / "python").exists():
        fix = "run `source .venv/bin/activate` in the repository first (dvc.yaml's commands say `python`)"
    else:
        fix = "create it with `make demo` (it sets up .venv from requirements.txt), then `source .venv/bin/activate`"
    return (
        f"{sys.executable} is not the project's Python environment (it lacks {', '.join(missing)}); "
        f"{fix}, and run again"
    )


if problem := environment_problem():
    print(f"error: {problem}", file=sys.stderr)
    raise SystemExit(1)
