"""Per-seed SQuAD EM/F1 (or any metrics) of DVC experiments, with mean and standard deviation.

    dvc exp run --queue -S '++squad.recipe.seed=1,2,3,4,5' && dvc queue start
    python -m scripts.stability                      # once the queue is done (`dvc queue status`)
    python -m scripts.stability --param tasks.rte.recipe.seed --metrics-file metrics/tasks/rte.json --keys accuracy

Reads `dvc exp show --json`; only `dvc exp run` experiments count: every experiment of the
current commit (narrow with `--experiments NAME ...`), one that failed or has no metrics listed
as such. Runs of `dvc repro` (the workspace, the commits) are no experiments: the summary names
those it skipped, so a seed run with `dvc repro` is not silently missing from the spread.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bert.errors import UserError, run_main
from stages.common import layout


def experiment_rows(exp_show: list[dict], param: str, metrics_file: str) -> list[dict]:
    """One row per experiment of the baseline commit: name, param value, metrics (or None)."""
    rows = []
    for baseline in exp_show:
        if baseline.get("rev") == "workspace":
            continue
        for experiment in baseline.get("experiments") or []:
            for revision in experiment.get("revs", []):
                data = revision.get("data") or {}
                value = data.get("params", {}).get("params.yaml", {}).get("data", {})
                for key in param.split("."):
                    value = value.get(key) if isinstance(value, dict) else None
                metrics = data.get("metrics", {}).get(metrics_file, {}).get("data")
                rows.append(
                    {
                        "name": revision.get("name") or revision.get("rev", "")[:7],
                        param: value,
                        "metrics": metrics,
                    }
                )
    return rows


def skipped_runs(exp_show: list[dict], metrics_file: str) -> list[str]:
    """The runs with these metrics that are no experiments: the workspace and each baseline commit
    (what `dvc repro` left), named as `dvc exp show` names them."""
    skipped = []
    for baseline in exp_show:
        metrics = ((baseline.get("data") or {}).get("metrics") or {}).get(metrics_file, {}).get("data")
        if metrics:
            rev = baseline.get("rev", "")
            name = baseline.get("name")
            skipped.append(rev if rev == "workspace" else f"{rev[:7]} ({name})" if name else rev[:7])
    return skipped


def counted_line(rows: list[dict], skipped: list[str]) -> str:
    """What the table covers, said above it: experiments only, and the runs left out."""
    line = f"Counted: `dvc exp run` experiments of this commit only ({len(rows)})."
    if skipped:
        line += f" Not counted (not `dvc exp run` experiments, or left out by --experiments): {', '.join(skipped)}"
    return line


def summarize(rows: list[dict], param: str, keys: tuple[str, ...]) -> str:
    finished = [row for row in rows if row["metrics"]]
    if not finished:
        raise UserError(
            "no finished experiment has these metrics yet; see `dvc queue status` and `dvc exp show`"
        )
    lines = [f"{'experiment':<24} {param:>16} " + " ".join(f"{key:>12}" for key in keys)]
    for row in sorted(rows, key=lambda row: str(row[param])):
        if row["metrics"]:
            values = " ".join(f"{row['metrics'].get(key, float('nan')):>12.2f}" for key in keys)
        else:
            values = "   (no metrics: failed or still running)"
        lines.append(f"{row['name']:<24} {row[param]!s:>16} {values}")
    for label, reduce in (("mean", statistics.fmean), ("std", statistics.stdev)):
        cells = []
        for key in keys:
            column = [row["metrics"][key] for row in finished if key in row["metrics"]]
            ok = len(column) >= (2 if label == "std" else 1)
            cells.append(f"{reduce(column):>12.2f}" if ok else f"{'n/a':>12}")
        lines.append(f"{label:<24} {f'n={len(finished)}':>16} " + " ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--param", default="squad.recipe.seed", help="the param that varies (default squad.recipe.seed)"
    )
    parser.add_argument("--metrics-file", default=str(layout.metrics("squad")))
    parser.add_argument("--keys", nargs="+", default=["exact_match", "f1"], help="metrics to show")
    parser.add_argument("--experiments", nargs="*", help="only these experiment names")
    args = parser.parse_args()
    dvc = Path(sys.executable).with_name("dvc")
    result = subprocess.run([str(dvc), "exp", "show", "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"`dvc exp show --json` failed: {result.stderr.strip()}")
    exp_show = json.loads(result.stdout)
    rows = experiment_rows(exp_show, args.param, args.metrics_file)
    skipped = skipped_runs(exp_show, args.metrics_file)
    if args.experiments:
        skipped += [row["name"] for row in rows if row["name"] not in args.experiments]
        rows = [row for row in rows if row["name"] in args.experiments]
    print(counted_line(rows, skipped))
    print(summarize(rows, args.param, tuple(args.keys)))


if __name__ == "__main__":
    run_main(main)
