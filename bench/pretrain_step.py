"""Sequences/s and MFU of one full pretraining step (forward, backward, optimiser step): our
BertForPreTraining against transformers.BertForPreTraining, same config, batch, optimiser and
device, in the same run (bert.pretraining.benchmark.time_pretraining).

    python bench/pretrain_step.py --size tiny --batch 32 --seq-len 128 --threads 2
    python bench/pretrain_step.py --size base --batch 8 --seq-len 128 --threads 2 --warmup 1
    python bench/pretrain_step.py --size large --batch 32 --seq-len 128 --device cuda --precision bf16

Each sequence is full length (no padding, as most phase-1 sequences are) with the attention mask
passed anyway, round(0.15 x seq-len) masked positions and an NSP label. The two models take turns,
one step each per round (`--steps`), for `--rounds` rounds: sequences/s come from each model's
fastest round, the speed-up is the median of the per-round ratios (a machine shared with other
work slows both alike within a round). The table splits a step into forward + backward and the
optimiser step, and gives model TFLOP/s and MFU: model FLOPs per step (bert.model.flops.pretraining_flops,
counted the same for both models: work nobody asked for earns no credit) over time and over the
dense matmul peak measured first, in the same process, at the model's shapes
(bert.model.flops.matmul_peak). On a known GPU, MFU against the data sheet's peak as well.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from bert.model.config import BertConfig  # noqa: E402
from bert.model.flops import datasheet_peak, matmul_peak  # noqa: E402
from bert.model.precision import AUTOCAST_DTYPES, allow_tf32  # noqa: E402
from bert.pretraining.benchmark import MODELS, Runner, make_batch, masked_per_sequence, time_pretraining  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="tiny", help="tiny | mini | base | large | path to a config.json")
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--precision", choices=list(AUTOCAST_DTYPES), default="fp32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=1, help="timed steps per model and round")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per model first")
    parser.add_argument(
        "--rounds", type=int, default=10, help="alternating timing rounds; the fastest counts"
    )
    parser.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw", help="for every model")
    parser.add_argument(
        "--models",
        default="ours,transformers",
        help=f"comma-separated subset of {','.join(MODELS)} (ours_unpadded: unpad=True, on CUDA flash "
        "attention's variable-length kernel; the padded path's mask rules flash out)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    parser.add_argument(
        "--peak-tflops", type=float, default=None, help="data-sheet peak for a GPU it does not know"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--profile", type=int, default=0, metavar="ROWS",
                        help="then profile one more step of ours: the top ROWS operators and the matmuls' share")  # fmt: skip
    args = parser.parse_args(argv)
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown:
        parser.error(f"--models: unknown {', '.join(sorted(unknown))}; use {', '.join(MODELS)}")
    return args


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu ({torch.get_num_threads()} threads)"


MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def profile_step(config: BertConfig, args, device: torch.device, peak_tflops: float) -> dict:
    """torch.profiler over one step of ours (after a warm-up step): the operators by self time, and
    the matmuls' share of the step and their FLOP rate against the measured peak."""
    from torch.profiler import ProfilerActivity, profile

    runner = Runner("ours", config, args.optimizer, args.precision, device)
    batch = make_batch(config, args.batch, args.seq_len, masked_per_sequence(args.seq_len), device)
    runner.step(batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, record_shapes=True, with_flops=True) as profiler:
        runner.step(batch)
    events = profiler.key_averages()
    timed = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    total = sum(getattr(event, timed) for event in events) / 1e6
    matmul_seconds = sum(getattr(e, timed) for e in events if e.key in MATMULS) / 1e6
    matmul_flops = sum(e.flops for e in events if e.key in MATMULS)
    print(events.table(sort_by=timed, row_limit=args.profile))
    summary = {
        "operator_seconds": total,
        "matmul_share": matmul_seconds / total,
        "matmul_tflops_per_second": matmul_flops / matmul_seconds / 1e12,
        "matmul_rate_of_peak": matmul_flops / matmul_seconds / 1e12 / peak_tflops,
        "top": [
            {"operator": e.key, "seconds": getattr(e, timed) / 1e6, "share": getattr(e, timed) / 1e6 / total,
             "calls": e.count}
            for e in sorted(events, key=lambda e: -getattr(e, timed))[: args.profile]
        ],
    }  # fmt: skip
    print(f"matmuls ({', '.join(MATMULS)}): {100 * summary['matmul_share']:.0f}% of the operator time, at "
          f"{summary['matmul_tflops_per_second']:.3f} TFLOP/s ({100 * summary['matmul_rate_of_peak']:.0f}% of "
          f"the measured peak)")  # fmt: skip
    return summary


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    allow_tf32(device, args.precision)  # as training does
    config = BertConfig.resolve(args.size, args.vocab_size)
    results = time_pretraining(
        config, args.batch, args.seq_len, masked_per_sequence(args.seq_len), tuple(args.models.split(",")),
        args.steps, args.warmup, args.rounds, args.precision, device, args.optimizer,
        measure_peak=lambda: matmul_peak(config, args.batch * args.seq_len, device, args.precision),
    )  # fmt: skip
    peak = results["matmul_peak"]["tflops"]
    sheet = args.peak_tflops or datasheet_peak(device, args.precision)
    results = {"size": args.size, "device": device_label(device), "torch": torch.__version__,
               "load_average": list(os.getloadavg()), **results, "datasheet_peak_tflops": sheet}  # fmt: skip
    print(f"{args.size} batch {args.batch} x {args.seq_len}, {args.precision}, {results['device']}, "
          f"torch {torch.__version__}; measured matmul peak {peak:.3f} TFLOP/s at {results['matmul_peak']['shape']}")  # fmt: skip
    print(f"{'model':<14}{'seq/s':>10}{'ms/step':>10}{'fwd+bwd':>10}{'optim':>10}{'TFLOP/s':>10}{'MFU':>8}"
          + (f"{'MFU sheet':>11}" if sheet else ""))  # fmt: skip
    for name, entry in results["models"].items():
        if sheet:
            entry["mfu_datasheet"] = entry["model_tflops_per_second"] / sheet
        print(
            f"{name:<14}{entry['sequences_per_second']:>10.2f}{entry['ms_per_step']:>10.1f}"
            f"{entry['ms_forward_backward']:>10.1f}{entry['ms_optimizer']:>10.1f}"
            f"{entry['model_tflops_per_second']:>10.3f}{100 * entry['mfu']:>7.1f}%"
            + (f"{100 * entry['mfu_datasheet']:>10.1f}%" if sheet else "")
        )
    if "speedup" in results:
        print(f"speed-up (ours / transformers, median of paired rounds): {results['speedup']:.2f}x")
    if args.profile:
        results["profile"] = profile_step(config, args, device, peak)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
