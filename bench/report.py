"""The performance table: pretraining phase 1 (seq 128) and phase 2 (seq 512), SQuAD fine-tuning
and inference (seq 384), at BERT sizes (`--sizes`: tiny, mini, base, large), on the device at hand:
sequences/s, model TFLOP/s, MFU against the matmul peak measured in the same run, and the speed
ratio to `transformers` on the same batches, as one JSON file and a Markdown table.

    python bench/report.py                      # --device auto: the GPU if there is one, else the CPU
    python bench/report.py --sizes large --precision bf16 --out-dir bench/results
    python bench/report.py --quick              # tiny model, batch 2, one step: a smoke run (seconds)

Each figure comes from the benchmark that owns it: bert.pretraining.benchmark.time_pretraining (one full
pretraining step with LAMB, ours and transformers taking turns, the fastest of --rounds rounds)
and bert/squad/benchmark.py (a fine-tuning step with AdamW, clipping included, ours only; the
forward alone, ours and transformers taking turns). Sequences are full length (no padding), so
the figures are those of the model, not of the data's length mix. Model FLOPs: bert.model.flops
(pretraining_flops; question_answering_flops, x3 for training). The peak: bert.model.flops.matmul_peak,
the best dense matmul rate at the row's own shapes (tokens = batch x seq; H x H, H x I, I x H) in
the row's precision, measured just before the row. On a known GPU the table also gives MFU
against the data sheet's peak (`--peak-tflops` for others). Default batch sizes per device:
--batch-phase1 etc. override them.
"""

import argparse
import datetime
import os
import platform
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from bert.atomic import atomic_file, write_json  # noqa: E402
from bert.model.config import BertConfig
from bert.model.flops import datasheet_peak, matmul_peak, mfu, question_answering_flops  # noqa: E402
from bert.model.network import BertForQuestionAnswering  # noqa: E402
from bert.model.precision import allow_tf32  # noqa: E402
from bert.pretraining.benchmark import time_pretraining  # noqa: E402
from bert.squad.benchmark import random_inputs, time_inference, time_training  # noqa: E402

TASKS = ("phase1", "phase2", "squad_finetune", "squad_inference")
SEQ_LEN = {"phase1": 128, "phase2": 512, "squad_finetune": 384, "squad_inference": 384}
TASK_NAMES = {"phase1": "pretraining phase 1", "phase2": "pretraining phase 2",
              "squad_finetune": "SQuAD fine-tuning", "squad_inference": "SQuAD inference"}  # fmt: skip
# Micro-batch per device: on a GPU NVIDIA's per-GPU micro-batches for BERT-large on 80 GB (phase 1
# 256 x 128, phase 2 32 x 512; SQuAD 32 for training); on a CPU small enough to finish in minutes.
DEFAULT_BATCH = {
    "cuda": {"phase1": 256, "phase2": 32, "squad_finetune": 32, "squad_inference": 128},
    "cpu": {"phase1": 2, "phase2": 1, "squad_finetune": 1, "squad_inference": 2},
}
DEFAULT_STEPS = {"cuda": (10, 5), "cpu": (1, 1)}  # (timed steps, warm-up steps)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/report.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:<n>")
    parser.add_argument("--sizes", default="base,large", help="comma-separated model presets")
    parser.add_argument(
        "--tasks", default=",".join(TASKS), help=f"comma-separated subset of {','.join(TASKS)}"
    )
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="auto",
                        help="auto: bf16 on a GPU that has it, else fp32")  # fmt: skip
    parser.add_argument("--steps", type=int, help="timed steps per figure (default per device)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default per device)")
    parser.add_argument("--rounds", type=int, default=1, help="pretraining timing rounds; the fastest counts")
    for task in TASKS:
        parser.add_argument(f"--batch-{task.replace('_', '-')}", type=int, dest=f"batch_{task}")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--peak-tflops", type=float, help="data-sheet peak of a GPU it does not know")
    parser.add_argument("--no-compare", action="store_true", help="ours only: no transformers timings")
    parser.add_argument("--quick", action="store_true", help="tiny model, batch 2, 1 step: a smoke run")
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results"))
    return parser.parse_args(argv)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({torch.get_num_threads()} threads)"


def resolve_precision(name: str, device: torch.device) -> str:
    if name != "auto":
        return name
    return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"


def transformers_available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def pretraining_row(config: BertConfig, task: str, batch: int, settings: dict, sweep) -> tuple:
    """Ours (and transformers) at one phase's shape, the matmul sweep taking its turn in each round:
    (sequences/s, model FLOPs per sequence, speed-up, the best sweep's TFLOP/s)."""
    models = ("ours", "transformers") if settings["compare"] else ("ours",)
    result = time_pretraining(
        config, batch, SEQ_LEN[task], None, models, settings["steps"], settings["warmup"], settings["rounds"],
        settings["precision"], settings["device"], "lamb", measure_peak=sweep,
    )  # fmt: skip
    speed = result["models"]["ours"]["sequences_per_second"]
    return (
        speed,
        result["model_tflops_per_step"] * 1e12 / batch,
        result.get("speedup"),
        result["matmul_peak"]["tflops"],
    )


def squad_row(config: BertConfig, task: str, batch: int, settings: dict, sweep) -> tuple:
    """Fine-tuning (ours) or inference (ours and transformers, taking turns) at seq 384, then a sweep."""
    device, precision, seq_len = settings["device"], settings["precision"], SEQ_LEN[task]
    torch.manual_seed(0)
    model = BertForQuestionAnswering(config).to(device)
    if task == "squad_finetune":
        figures = time_training(model, batch, seq_len, settings["steps"], settings["warmup"], precision)
        return (
            figures["sequences_per_second"],
            question_answering_flops(config, seq_len),
            None,
            sweep().tflops,
        )
    models = {"ours": model}
    if settings["compare"]:
        import transformers

        hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
        models["transformers"] = transformers.BertForQuestionAnswering(hf_config).to(device)
    inputs = random_inputs(config.vocab_size, batch, seq_len, device)
    figures = time_inference(models, inputs, settings["steps"], settings["warmup"], precision)
    speed = figures["ours"]["sequences_per_second"]
    ratio = speed / figures["transformers"]["sequences_per_second"] if settings["compare"] else None
    return speed, question_answering_flops(config, seq_len, training=False), ratio, sweep().tflops


def measure_row(size: str, task: str, batch: int, settings: dict) -> dict:
    """The row (sequences/s, model TFLOP/s, ratio to transformers) and its MFU against the best
    matmul sweep at the row's shapes, taken before it and after it (pretraining: after each round),
    so that on a shared machine the peak meets the same moments of load as the model."""
    config = BertConfig.preset(size, settings["vocab_size"])
    sweep = partial(matmul_peak, config, batch * SEQ_LEN[task], settings["device"], settings["precision"],
                    settings["peak_seconds"])  # fmt: skip
    before = sweep()
    measure = pretraining_row if task in ("phase1", "phase2") else squad_row
    speed, flops_per_sequence, ratio, after = measure(config, task, batch, settings, sweep)
    peak = max(before.tflops, after)
    sheet = settings["datasheet_peak"]
    return {
        "sequences_per_second": speed,
        "model_tflops_per_second": speed * flops_per_sequence / 1e12,
        "peak_tflops": peak,
        "mfu": mfu(speed * flops_per_sequence, 1.0, peak),
        "mfu_datasheet": mfu(speed * flops_per_sequence, 1.0, sheet),
        "vs_transformers": ratio,
    }


def run(args: argparse.Namespace) -> dict:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    precision = resolve_precision(args.precision, device)
    allow_tf32(device, precision)  # what training does on Ampere and later
    kind = "cuda" if device.type == "cuda" else "cpu"
    steps, warmup = DEFAULT_STEPS[kind]
    sizes = ["tiny"] if args.quick else args.sizes.split(",")
    settings = {
        "device": device,
        "precision": precision,
        "vocab_size": args.vocab_size,
        "steps": 1 if args.quick else args.steps or steps,
        "warmup": 0 if args.quick else warmup if args.warmup is None else args.warmup,
        "rounds": 1 if args.quick else args.rounds,
        "datasheet_peak": args.peak_tflops or datasheet_peak(device, precision),
        "compare": not args.no_compare and transformers_available(),
        "peak_seconds": 0.002 if args.quick else None,  # per timed group of the sweep; None: bert.model.flops' default
    }  # fmt: skip
    meta = {
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "date": datetime.date.today().isoformat(),
        "load_average": list(os.getloadavg()),  # a shared machine: what else ran
        "precision": precision,
        "steps": settings["steps"],
        "warmup": settings["warmup"],
        "datasheet_peak_tflops": settings["datasheet_peak"],
    }
    rows = []
    for size in sizes:
        for task in args.tasks.split(","):
            if task not in TASKS:
                raise SystemExit(f"--tasks: unknown task {task!r}; allowed: {', '.join(TASKS)}")
            batch = 2 if args.quick else getattr(args, f"batch_{task}") or DEFAULT_BATCH[kind][task]
            figures = measure_row(size, task, batch, settings)
            rows.append({"model": size, "task": task, "seq_len": SEQ_LEN[task], "batch": batch,
                         "precision": precision, **figures})  # fmt: skip
            print(f"{size} {TASK_NAMES[task]}: {figures['sequences_per_second']:.2f} sequences/s, "
                  f"MFU {100 * figures['mfu']:.1f}% of {figures['peak_tflops']:.3f} TFLOP/s", flush=True)  # fmt: skip
    return {"meta": meta, "rows": rows}


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown(report: dict) -> str:
    meta = report["meta"]
    lines = [
        "| Model | Phase / task | Seq len | Batch | Precision | Sequences/s | Model TFLOP/s | Measured peak TFLOP/s "
        "| MFU | MFU (data sheet) | vs transformers | Device | torch | Date |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for row in report["rows"]:
        model = f"BERT-{row['model']}" if row["model"] in ("base", "large") else row["model"]
        ratio = "-" if row["vs_transformers"] is None else f"{row['vs_transformers']:.2f}x"
        lines.append(
            f"| {model} | {TASK_NAMES[row['task']]} | {row['seq_len']} | {row['batch']} | {row['precision']} "
            f"| {row['sequences_per_second']:.2f} | {row['model_tflops_per_second']:.3f} | {row['peak_tflops']:.3f} "
            f"| {percent(row['mfu'])} | {percent(row['mfu_datasheet'])} | {ratio} "
            f"| {meta['device']} | {meta['torch']} | {meta['date']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    args = parse_args(argv)
    report = run(args)
    table = markdown(report)
    write_json(args.out_dir / "report.json", report)
    with atomic_file(args.out_dir / "report.md") as tmp:
        tmp.write_text(table, encoding="utf-8")
    print(f"\n{table}\nwrote {args.out_dir / 'report.json'} and {args.out_dir / 'report.md'}")
    return report


if __name__ == "__main__":
    main()
