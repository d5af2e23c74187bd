"""Stage glue_score: the GLUE score of the GLUE tasks in tasks.run, as the leaderboard computes it.

    python -m stages.glue_score

metrics/tasks/<task>.json of each GLUE task in tasks.run -> metrics/glue.json: `glue_score` (the
mean over the tasks of each task's mean measure; bert.tasks.metrics.glue_score), each task's score,
and the tasks it averages; with tasks.<task>.seeds, the score from each task's medians, and its
spread over the seeds (bert.tasks.evaluation.glue_over_seeds). WNLI is not among them, as in the BERT paper; SWAG is not a GLUE task.
"""

import json
import logging

from bert.atomic import write_json
from bert.errors import UserError, run_main
from bert.tasks.catalogue import GLUE_TASKS, task_named
from bert.tasks.evaluation import glue_over_seeds, measure_names
from bert.tasks.metrics import glue_score
from stages.common import layout
from stages.common.params import load_params

log = logging.getLogger("glue_score")
OUT_FILE = layout.metrics("glue")


def main() -> None:
    tasks = [task for task in load_params().tasks.run if task in GLUE_TASKS]
    measures, figures, names = {}, {}, {}
    for name in tasks:
        path = layout.task_metrics(name)
        if not path.is_file():
            raise UserError(f"{path}: not found; run `dvc repro evaluate_task@{name}`")
        figures[name] = json.loads(path.read_text(encoding="utf-8"))
        names[name] = measure_names(task_named(name))
        # A task with several seeds: the medians, under the measures' own names.
        measures[name] = {key: figures[name][key] for key in names[name]}
    result = {"glue_score": glue_score(measures) if measures else None, "tasks": tasks}
    result.update(glue_over_seeds(figures, names))  # nothing without seeds: today's file
    write_json(OUT_FILE, result)
    if measures:
        spread = (
            f" (spread {result['glue_score_spread']:.2f} over seeds)" if "glue_score_spread" in result else ""
        )
        log.info("GLUE score %.2f%s over %s -> %s", result["glue_score"], spread, ", ".join(tasks), OUT_FILE)
    else:
        log.info("no GLUE task in tasks.run -> %s", OUT_FILE)


if __name__ == "__main__":
    run_main(main)
