"""Stage predict_task@<task>: the fine-tuned model's predictions on each dev split of a task.

    python -m stages.predict_task mrpc

data/models/tasks/<task>/ + data/tasks/<task>/ -> data/task_predictions/<task>/<split>.tsv
(dev.tsv; MNLI's dev_matched.tsv and dev_mismatched.tsv), with predict.batch_size and
finetune.precision.
"""

import argparse
import logging
import time

import torch

from bert.atomic import atomic_folder
from bert.errors import UserError, run_main
from bert.tasks.data import read_split, task_named
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.tasks.predict import predict_logits, predicted_labels
from bert.tasks.predictions_file import write_predictions
from bert.text.tokenization import load_tokenizer_from_dir
from stages import layout
from stages.params import load_params

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
    model = load_task_model(task, model_dir)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    max_seq_length = getattr(params.tasks, task.name).max_seq_length
    with atomic_folder(layout.task_predictions(task.name)) as staging:
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
            write_predictions(staging / f"{split}.tsv", task, predicted_labels(task, logits), examples.rows)
            log.info("%s %s: %d examples in %.1f s on %s", task.title, split, len(examples), seconds, device)
    log.info("wrote %s", layout.task_predictions(task.name))


if __name__ == "__main__":
    run_main(main)
