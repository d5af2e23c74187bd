"""Stage evaluate_task@<task>: the task's official measures of its dev predictions.

    python -m stages.evaluate_task mrpc

data/task_predictions/<task>/ + data/tasks/<task>/ -> metrics/tasks/<task>.json: the measures in
percent (bert.tasks.evaluation), `examples` per dev split, and `task`.
"""

import argparse
import logging

from bert.atomic import write_json
from bert.errors import run_main
from bert.tasks.data import read_split, task_named
from bert.tasks.evaluation import split_metrics, task_metrics
from bert.tasks.predictions_file import read_predictions
from stages import layout

log = logging.getLogger("evaluate_task")


def evaluate(task_name: str) -> dict:
    task = task_named(task_name)
    scores, examples = {}, {}
    for split in task.dev_splits:
        gold = read_split(task, layout.task_data(task.name) / task.splits[split])
        predictions = read_predictions(layout.task_predictions(task.name) / f"{split}.tsv", task, gold.rows)
        scores[split] = split_metrics(task, predictions, gold.labels)
        examples[split] = len(gold)
    return {"task": task.title, **task_metrics(task, scores), "examples": examples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task of `tasks.run` in params.yaml, e.g. mrpc")
    task = parser.parse_args().task
    metrics = evaluate(task)
    path = layout.task_metrics(task)
    write_json(path, metrics)
    shown = ", ".join(f"{k} {v:.2f}" for k, v in metrics.items() if isinstance(v, float))
    log.info("%s: %s -> %s", metrics["task"], shown, path)


if __name__ == "__main__":
    run_main(main)
