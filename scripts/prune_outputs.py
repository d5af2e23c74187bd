"""Remove the metrics and curves that no stage of the current DAG writes.

    python -m scripts.prune_outputs [--dry-run]

Metrics (metrics/) and DVCLive curves (dvclive/) are committed with the project (cache: false), so
when params take a stage out of the DAG (a corpus or task removed, squad.run: []) DVC forgets them
but git does not: the files stay, and `dvc plots show` draws the curves that dvc.yaml's plots name
as if they were the current run's (`dvc metrics show` already lists only the current stages'
metrics). This removes every file under metrics/ and dvclive/ that lies in no output of a stage of
the DAG as params.yaml has it now, and the folders left empty, naming each; commit the removal with
the run. --dry-run only names them. Run it from the repository root, after changing params.
"""

import argparse
import shutil
from pathlib import Path

from stages.common import layout


def declared_outputs() -> list[Path]:
    """Every output of every stage of the DAG that dvc.yaml and params.yaml give now."""
    from dvc.repo import Repo

    with Repo(".") as repo:
        return [Path(out.def_path) for stage in repo.index.stages for out in stage.outs]


def stale_entries() -> list[Path]:
    """The files and folders under metrics/ and dvclive/ that no current stage writes: a folder whole
    when nothing in it is an output, else the files in it that are not."""
    outputs = declared_outputs()

    def is_output(path: Path) -> bool:
        return any(path == out or out in path.parents for out in outputs)

    def holds_output(folder: Path) -> bool:
        return any(folder in out.parents for out in outputs)

    stale = []
    pending = [root for root in (layout.METRICS, layout.LIVE) if root.is_dir()]
    while pending:
        folder = pending.pop()
        for entry in sorted(folder.iterdir()):
            if is_output(entry):
                continue
            if entry.is_dir() and not entry.is_symlink() and holds_output(entry):
                pending.append(entry)
            else:
                stale.append(entry)
    return sorted(stale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="name what would be removed, remove nothing")
    dry_run = parser.parse_args().dry_run
    stale = stale_entries()
    for entry in stale:
        print(f"{'would remove' if dry_run else 'removed'} {entry}{'/' if entry.is_dir() else ''}")
        if dry_run:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    if not stale:
        print("nothing to remove: every file under metrics/ and dvclive/ is a current stage's")


if __name__ == "__main__":
    main()
