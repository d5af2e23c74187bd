"""Stage evaluate_task@<task>: the task's official measures of its dev predictions.

    python -m stages.evaluate_task mrpc

data/task_predictions/<task>/ + data/tasks/<task>/ -> metrics/tasks/<task>.json: the measures in
percent (bert.tasks.evaluation), `examples` per dev split, `dev_in_train` per dev split (its
examples that the train split holds too: bert.tasks.data.dev_in_train; logged, a warning when
any), and `task`. A task fine-tuned with several seeds (seeds.json beside its predictions): each
measure's median over them, its `spread` (max − min) and each seed's figures (`seeds`).
"""

import argparse
import logging
from pathlib import Path

from bert.atomic import write_json
from bert.errors import run_main
from bert.inputs import read_json
from bert.tasks.catalogue import Task, task_named
from bert.tasks.data import dev_in_train, read_split
from bert.tasks.evaluation import over_seeds, split_metrics, task_metrics
from bert.tasks.predictions_file import read_predictions
from stages.common import layout

log = logging.getLogger("evaluate_task")


def evaluate(task_name: str) -> dict:
    task = task_named(task_name)
    folder = layout.task_predictions(task.name)
    seeds_file = folder / layout.SEEDS_FILE
    if not seeds_file.is_file():  # one run, with the recipe's seed
        figures, examples = evaluate_predictions(task, folder)
        return {"task": task.title, **figures, "examples": examples, "dev_in_train": overlap(task, examples)}
    # Several seeds: the first seed's predictions are the task's own, each other's in its folder.
    seeds = read_json(seeds_file)["seeds"]
    per_seed = {}
    for index, seed in enumerate(seeds):
        per_seed[seed], examples = evaluate_predictions(
            task, folder / ("" if index == 0 else layout.seed_folder(seed))
        )
    return {
        "task": task.title,
        **over_seeds(per_seed),
        "examples": examples,
        "dev_in_train": overlap(task, examples),
    }


def overlap(task: Task, examples: dict[str, int]) -> dict[str, int]:
    """Per dev split, its examples that the train split holds too (one log line: a warning when any)."""
    data = layout.task_data(task.name)
    train = read_split(task, data / task.splits["train"])
    found = {
        split: dev_in_train(train, read_split(task, data / task.splits[split])) for split in task.dev_splits
    }
    said = ", ".join(f"{split} {found[split]} of {examples[split]}" for split in task.dev_splits)
    if any(found.values()):
        log.warning(
            "%s: dev examples whose texts the train split holds too: %s; their figures measure memory, "
            "not generalisation: check the split files (docs/tasks.md#dev-examples-in-train)",
            task.title, said,
        )  # fmt: skip
    else:
        log.info("%s: no dev example's texts are in the train split (%s)", task.title, said)
    return found


def evaluate_predictions(task: Task, folder: Path) -> tuple[dict[str, float], dict[str, int]]:
    """The task's measures of the predictions in one folder, and the examples of each dev split."""
    scores, examples = {}, {}
    for split in task.dev_splits:
        gold = read_split(task, layout.task_data(task.name) / task.splits[split])
        predictions = read_predictions(folder / f"{split}.tsv", task, gold.rows)
        scores[split] = split_metrics(task, predictions, gold.labels)
        examples[split] = len(gold)
    return task_metrics(task, scores), examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task of `tasks.run` in params.yaml, e.g. mrpc")
    task = parser.parse_args().task
    metrics = evaluate(task)
    path = layout.task_metrics(task)
    write_json(path, metrics)
    shown = ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if isinstance(v, float))
    if "seeds" in metrics:
        shown += f" (medians over seeds {', '.join(metrics['seeds'])})"
    log.info("%s: %s -> %s", metrics["task"], shown, path)


if __name__ == "__main__":
    run_main(main)
