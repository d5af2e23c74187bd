"""Stage glue_score: the GLUE score of the GLUE tasks in tasks.run, as the leaderboard computes it.

    python -m stages.glue_score

metrics/tasks/<task>.json of each GLUE task in tasks.run -> metrics/glue.json: `glue_score` (the
mean over the tasks of each task's mean measure; bert.tasks.metrics.glue_score), each task's score,
and the tasks it averages. WNLI is not among them, as in the BERT paper; SWAG is not a GLUE task.
"""

import json
import logging

from bert.atomic import write_json
from bert.errors import UserError, run_main
from bert.tasks.data import GLUE_TASKS, task_named
from bert.tasks.evaluation import measure_names
from bert.tasks.metrics import glue_score
from stages import layout
from stages.params import load_params

log = logging.getLogger("glue_score")
OUT_FILE = layout.metrics("glue")


def main() -> None:
    tasks = [task for task in load_params().tasks.run if task in GLUE_TASKS]
    measures = {}
    for name in tasks:
        path = layout.task_metrics(name)
        if not path.is_file():
            raise UserError(f"{path}: not found; run `dvc repro evaluate_task@{name}`")
        figures = json.loads(path.read_text(encoding="utf-8"))
        measures[name] = {key: figures[key] for key in measure_names(task_named(name))}
    result = {"glue_score": glue_score(measures) if measures else None, "tasks": tasks}
    write_json(OUT_FILE, result)
    if measures:
        log.info("GLUE score %.2f over %s -> %s", result["glue_score"], ", ".join(tasks), OUT_FILE)
    else:
        log.info("no GLUE task in tasks.run -> %s", OUT_FILE)


if __name__ == "__main__":
    run_main(main)
