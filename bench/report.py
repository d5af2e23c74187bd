"""The performance table: BERT-base and BERT-large pretraining (phase 1, seq 128; phase 2, seq 512)
sequences/s and MFU, and SQuAD fine-tuning and inference (seq 384) sequences/s, on the device at
hand, as one JSON file and a Markdown table like NVIDIA's README tables.

    python bench/report.py                      # --device auto: the GPU if there is one, else the CPU
    python bench/report.py --sizes large --precision bf16 --out-dir bench/results
    python bench/report.py --quick              # tiny model, batch 2, one step: a smoke run (seconds)

Each figure comes from the benchmark that owns it: bench/pretrain_step.py (one full pretraining
step with LAMB, the fastest of --rounds rounds) and bert/squad/benchmark.py (a fine-tuning step
with AdamW, clipping included; the forward alone). Sequences are full length (no padding), so
the figures are those of the model, not of the data's length mix. MFU is model
FLOPs (bert.modeling.training_flops_per_sequence for pretraining; for SQuAD the encoder on every
token, bert.modeling.encoder_forward_flops, x3 for training) over time and the GPU's dense peak for the precision; on a CPU it is left blank.
Default batch sizes per device: --batch-phase1 etc. override them.
"""

import argparse
import datetime
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from bench import pretrain_step  # noqa: E402
from bert.atomic import atomic_file, write_json  # noqa: E402
from bert.modeling import (  # noqa: E402
    BertConfig,
    BertForQuestionAnswering,
    encoder_forward_flops,
)
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
    parser.add_argument("--peak-tflops", type=float, help="GPU peak for MFU (default: known GPUs)")
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


def pretraining_row(size: str, task: str, batch: int, settings: dict) -> dict:
    argv = [
        "--size", size, "--vocab-size", str(settings["vocab_size"]), "--batch", str(batch),
        "--seq-len", str(SEQ_LEN[task]), "--precision", settings["precision"],
        "--device", str(settings["device"]), "--steps", str(settings["steps"]),
        "--warmup", str(settings["warmup"]), "--rounds", str(settings["rounds"]),
        "--optimizer", "lamb", "--models", "ours",
    ]  # fmt: skip
    if settings["peak_tflops"]:
        argv += ["--peak-tflops", str(settings["peak_tflops"])]
    result = pretrain_step.main(argv)["models"]["ours"]
    return {"sequences_per_second": result["sequences_per_second"], "mfu": result.get("mfu")}


def squad_row(size: str, task: str, batch: int, settings: dict) -> dict:
    device, precision = settings["device"], settings["precision"]
    config = BertConfig.preset(size, settings["vocab_size"])
    torch.manual_seed(0)
    model = BertForQuestionAnswering(config).to(device)
    seq_len = SEQ_LEN[task]
    if task == "squad_finetune":
        figures = time_training(model, batch, seq_len, settings["steps"], settings["warmup"], precision)
        flops = 3 * encoder_forward_flops(config, seq_len)  # backward = 2 x forward
    else:
        inputs = random_inputs(config.vocab_size, batch, seq_len, device)
        figures = time_inference({"ours": model}, inputs, settings["steps"], settings["warmup"], precision)[
            "ours"
        ]
        flops = encoder_forward_flops(config, seq_len)
    speed = figures["sequences_per_second"]
    peak = settings["peak"]
    return {"sequences_per_second": speed, "mfu": speed * flops / (peak * 1e12) if peak else None}


def run(args: argparse.Namespace) -> dict:
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    precision = resolve_precision(args.precision, device)
    if device.type == "cuda" and precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = True  # what training does on Ampere and later
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
        "peak_tflops": args.peak_tflops,
        "peak": pretrain_step.peak_tflops(argparse.Namespace(peak_tflops=args.peak_tflops, precision=precision), device),
    }  # fmt: skip
    meta = {
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if device.type == "cuda" else None,
        "date": datetime.date.today().isoformat(),
        "precision": precision,
        "steps": settings["steps"],
        "warmup": settings["warmup"],
        "peak_tflops": settings["peak"],
    }
    rows = []
    for size in sizes:
        for task in args.tasks.split(","):
            if task not in TASKS:
                raise SystemExit(f"--tasks: unknown task {task!r}; allowed: {', '.join(TASKS)}")
            batch = 2 if args.quick else getattr(args, f"batch_{task}") or DEFAULT_BATCH[kind][task]
            measure = pretraining_row if task in ("phase1", "phase2") else squad_row
            figures = measure(size, task, batch, settings)
            rows.append({"model": size, "task": task, "seq_len": SEQ_LEN[task], "batch": batch,
                         "precision": precision, **figures})  # fmt: skip
            print(f"{size} {TASK_NAMES[task]}: {figures['sequences_per_second']:.2f} sequences/s", flush=True)
    return {"meta": meta, "rows": rows}


def markdown(report: dict) -> str:
    meta = report["meta"]
    lines = [
        "| Model | Phase / task | Seq len | Batch | Precision | Sequences/s | MFU | Device | torch | Date |",
        "| --- | --- | ---: | ---: | --- | ---: | ---: | --- | --- | --- |",
    ]
    for row in report["rows"]:
        mfu = f"{100 * row['mfu']:.1f}%" if row["mfu"] is not None else "-"
        model = f"BERT-{row['model']}" if row["model"] in ("base", "large") else row["model"]
        lines.append(
            f"| {model} | {TASK_NAMES[row['task']]} | {row['seq_len']} | {row['batch']} | {row['precision']} "
            f"| {row['sequences_per_second']:.2f} | {mfu} | {meta['device']} | {meta['torch']} | {meta['date']} |"
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
