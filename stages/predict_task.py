"""Stage predict_task@<task>: the fine-tuned model's predictions on each dev split of a task.

    python -m stages.predict_task mrpc

data/models/tasks/<task>/ + data/tasks/<task>/ -> data/task_predictions/<task>/<split>.tsv
(dev.tsv; MNLI's dev_matched.tsv and dev_mismatched.tsv), with predict.batch_size and
finetune.precision. A task fine-tuned with several seeds (seeds.json beside its model): the first
seed's predictions there, each other's in seed-<seed>/, and seeds.json.
"""

import argparse
import logging
import time
from pathlib import Path

import torch

from bert.atomic import atomic_folder, write_json
from bert.errors import UserError, run_main
from bert.inputs import read_json
from bert.tasks.catalogue import Task, task_named
from bert.tasks.data import read_split
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.tasks.predict import predict_logits, predicted_labels
from bert.tasks.predictions_file import write_predictions
from bert.text.tokenization import load_tokenizer_from_dir
from stages.common import layout
from stages.common.params import Params, load_params

log = logging.getLogger("predict_task")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help="a task of `tasks.run` in params.yaml, e.g. mrpc")
    task = task_named(parser.parse_args().task)
    params = load_params()
    model_dir = layout.model(task.name)
    if not (model_dir / "config.json").is_file():
        raise UserError(f"{model_dir}: no model; run `dvc repro finetune_task@{task.name}` first")
    tokenizer, _ = load_tokenizer_from_dir(model_dir, params.vocab.lower_case)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    max_seq_length = getattr(params.tasks, task.name).max_seq_length
    seeds = read_seeds(model_dir)
    with atomic_folder(layout.task_predictions(task.name)) as staging:
        # The first seed's model is the task's own; each other seed's lies in its folder below it.
        for index, seed in enumerate(seeds or [None]):
            where = "" if index == 0 else layout.seed_folder(seed)
            model = load_task_model(task, model_dir / where).to(device)
            (staging / where).mkdir(exist_ok=True)
            predict_splits(task, model, tokenizer, params, max_seq_length, device, staging / where, seed)
        if seeds:
            write_json(staging / layout.SEEDS_FILE, {"seeds": seeds})
    log.info("wrote %s", layout.task_predictions(task.name))


def read_seeds(folder: Path) -> list[int] | None:
    """The seeds of a task fine-tuned with several (seeds.json beside its model or predictions), in
    order; None for one run with the recipe's seed."""
    path = folder / layout.SEEDS_FILE
    return read_json(path)["seeds"] if path.is_file() else None


def predict_splits(
    task: Task, model, tokenizer, params: Params, max_seq_length: int, device: torch.device, out_dir: Path,
    seed: int | None,
) -> None:  # fmt: skip
    """One model's predictions of each dev split of the task, into out_dir/<split>.tsv."""
    for split in task.dev_splits:
        dev_file = layout.task_data(task.name) / task.splits[split]
        examples = read_split(task, dev_file)
        features = make_features(
            examples, tokenizer, max_seq_length=max_seq_length, multiple_choice=task.kind == "choice"
        )
        started = time.perf_counter()
        logits = predict_logits(
            model,
            features,
            batch_size=params.predict.batch_size,
            device=device,
            precision=params.finetune.precision,
        )
        seconds = time.perf_counter() - started
        write_predictions(out_dir / f"{split}.tsv", task, predicted_labels(task, logits), examples.rows)
        log.info(
            "%s %s%s: %d examples in %.1f s on %s", task.title, split, "" if seed is None else f" (seed {seed})",
            len(examples), seconds, device,
        )  # fmt: skip


if __name__ == "__main__":
    run_main(main)
