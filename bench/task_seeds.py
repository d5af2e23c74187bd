"""SWAG and GLUE over several fine-tuning seeds and starts: per task the mean ± std of its main
measure, and of the GLUE score, for each `finetune.init` (e.g. our pretraining against random
weights), as the SQuAD stability study does for EM/F1.

    python -m bench.task_seeds --inits phase2 random --seeds 1 2 3 4 5 --out task_seeds.json
    python -m bench.task_seeds --tasks swag --out swag_seeds.json   # one task

Runs in a project where `dvc repro` has built data/weights/<init> for every init (`dvc repro
pretrain@phase2 init_random` for phase2 and random) and data/tasks/<task> for every task of tasks.run.
Each (init, seed) runs finetune_task, predict_task and evaluate_task of every task, then
glue_score, with every task's seed set to the seed (params.yaml is restored afterwards, and the
project's own task models, predictions, metrics and curves are moved aside and back; task
checkpoints are removed, so that every run starts from its init). This is what `dvc exp run --queue -S '++tasks.<task>.recipe.seed=...'` for every task and
`python -m scripts.stability` give, without DVC's experiment bookkeeping.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from bert.atomic import write_json
from bert.tasks.catalogue import GLUE_TASKS, task_named

# The project's own outputs of the task stages, moved aside during the study and back after it.
KEPT = [Path(p) for p in ("data/models/tasks", "data/task_predictions", "metrics", "dvclive/finetune_task")]


def run_stage(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")


def one_run(params: dict, init: str, seed: int, tasks: list[str]) -> dict:
    params["finetune"]["init"] = init
    starts = params["tasks"]["run"]  # each task's start as the project has it, else finetune.init's folder
    params["tasks"]["run"] = {
        task: starts[task] if starts.get(task) in tasks[:position] else "finetune.init"
        for position, task in enumerate(tasks)
    }
    for task in tasks:
        params["tasks"][task]["recipe"]["seed"] = seed  # tasks.<task>.seed is no key: the recipe's
    Path("params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    shutil.rmtree("data/checkpoints/tasks", ignore_errors=True)  # each run from its own start
    figures = {}
    for task in tasks:
        for stage in ("finetune_task", "predict_task", "evaluate_task"):
            run_stage(f"stages.{stage}", task)
        measures = json.loads(Path(f"metrics/tasks/{task}.json").read_text())
        main = task_named(task).metrics[0]
        figures[task] = next(value for key, value in measures.items() if key.startswith(main))
    if any(task in GLUE_TASKS for task in tasks):
        run_stage("stages.glue_score")
        figures["glue_score"] = json.loads(Path("metrics/glue.json").read_text())["glue_score"]
    return figures


def summary(runs: list[dict]) -> dict:
    keys = runs[0].keys()
    return {
        key: {
            "mean": statistics.fmean(run[key] for run in runs),
            "std": statistics.stdev(run[key] for run in runs) if len(runs) > 1 else 0.0,
            "per_seed": [run[key] for run in runs],
        }
        for key in keys
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inits", nargs="+", default=["phase2", "random"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--tasks", nargs="+", help="the tasks to study (default: tasks.run)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    original = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
    tasks = args.tasks or list(original["tasks"]["run"])
    params_text = Path("params.yaml").read_text(encoding="utf-8")
    aside = {path: path.with_name(path.name + ".task-seeds-aside") for path in KEPT}
    for path, moved in aside.items():
        if path.exists():
            path.rename(moved)
    started = time.time()
    results = {}
    try:
        for init in args.inits:
            runs = []
            for seed in args.seeds:
                runs.append(one_run(json.loads(json.dumps(original)), init, seed, tasks))
                print(init, seed, json.dumps({k: round(v, 2) for k, v in runs[-1].items()}), flush=True)
            results[init] = summary(runs)
    finally:
        Path("params.yaml").write_text(params_text, encoding="utf-8")
        shutil.rmtree("data/checkpoints/tasks", ignore_errors=True)
        for path, moved in aside.items():
            shutil.rmtree(path, ignore_errors=True)
            if moved.exists():
                moved.rename(path)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    report = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "commit": commit,
        "command": "python -m bench.task_seeds " + " ".join(sys.argv[1:]),
        "seconds": round(time.time() - started, 1),
        "tasks": tasks,
        "glue_tasks": [task for task in tasks if task in GLUE_TASKS],
        "results": results,
    }
    write_json(args.out, report)
    for init, figures in results.items():
        print(init, ", ".join(f"{key} {v['mean']:.2f} ± {v['std']:.2f}" for key, v in figures.items()))


if __name__ == "__main__":
    main()
