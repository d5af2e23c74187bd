"""Sequences/s of one full pretraining step (forward, backward, optimiser step): our
BertForPreTraining against transformers.BertForPreTraining + AdamW, same config, batch and
device, in the same run.

    python bench/pretrain_step.py --size tiny --batch 32 --seq-len 128 --threads 2
    python bench/pretrain_step.py --size base --batch 8 --seq-len 128 --threads 2 --warmup 1
    python bench/pretrain_step.py --size large --batch 32 --seq-len 128 --device cuda --precision bf16

Each sequence is full length (no padding, as most phase-1 sequences are) with the attention mask
passed anyway, ceil(0.15 x seq-len) masked positions and an NSP label. The two models take turns,
one step each per round (`--steps`), for `--rounds` rounds: sequences/s come from each model's
fastest round, the speed-up is the median of the per-round ratios (a machine shared with other
work slows both alike within a round). The table splits a step into forward + backward and the
optimiser step. On CUDA the table adds MFU: model FLOPs per step divided by time and by the GPU's
peak, counted the same for both models by bert.modeling.training_flops_per_sequence (about
6 x non-embedding parameters x tokens plus attention 12·L·S²·H, with the last layer and the MLM
head counted only for the rows the loss reads), so work nobody asked for earns no credit.
"""

import argparse
import contextlib
import importlib.util
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from bert.modeling import BertConfig, BertForPreTraining, training_flops_per_sequence  # noqa: E402
from bert.precision import AUTOCAST_DTYPES, allow_tf32, grad_scaler  # noqa: E402

MODELS = ("ours", "ours_unpadded", "transformers")  # ours_unpadded: BertForPreTraining(unpad=True)

# Dense peak TFLOP/s per GPU (bf16/fp16 tensor cores; fp32 = TF32 tensor cores), from the vendor
# data sheets (SXM parts). Pass --peak-tflops for other GPUs.
PEAK_TFLOPS = {
    "H200": {"bf16": 989, "fp16": 989, "fp32": 494},
    "H100": {"bf16": 989, "fp16": 989, "fp32": 494},
    "A100": {"bf16": 312, "fp16": 312, "fp32": 156},
    "A10": {"bf16": 125, "fp16": 125, "fp32": 62.5},
    "L4": {"bf16": 121, "fp16": 121, "fp32": 60},
    "V100": {"bf16": 0, "fp16": 125, "fp32": 15.7},
}


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
    parser.add_argument(
        "--optimizer", choices=["adamw", "lamb"], default="adamw", help="ours; transformers gets AdamW"
    )
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
        "--peak-tflops", type=float, default=None, help="GPU peak for MFU (default: known GPUs)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    unknown = set(args.models.split(",")) - set(MODELS)
    if unknown:
        parser.error(f"--models: unknown {', '.join(sorted(unknown))}; use {', '.join(MODELS)}")
    return args


def make_batch(config: BertConfig, batch: int, seq_len: int, device: torch.device, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    slots = math.ceil(0.15 * seq_len)
    input_ids = torch.randint(5, config.vocab_size, (batch, seq_len), generator=g)
    positions = (
        torch.stack([torch.randperm(seq_len - 1, generator=g)[:slots] + 1 for _ in range(batch)])
        .sort(1)
        .values
    )
    labels = torch.randint(5, config.vocab_size, (batch, slots), generator=g)
    hf_labels = torch.full_like(input_ids, -100).scatter_(1, positions, labels)  # HF: -100 = not masked
    tensors = dict(
        input_ids=input_ids,
        token_type_ids=(torch.arange(seq_len) >= seq_len // 2).long().expand(batch, -1).contiguous(),
        attention_mask=torch.ones(batch, seq_len, dtype=torch.long),
        masked_lm_positions=positions,
        masked_lm_ids=labels,
        next_sentence_labels=torch.randint(0, 2, (batch,), generator=g),
        hf_labels=hf_labels,
    )
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def make_optimizer(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if name == "lamb":
        if importlib.util.find_spec("bert.optim") is None:
            raise SystemExit("--optimizer lamb needs bert/optim.py, which this checkout does not have")
        from bert.optim import build_optimizer  # imported only when asked for

        return build_optimizer(model, "lamb", learning_rate=1e-4, weight_decay=0.01)
    return torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)


class Runner:
    """One model, its optimiser and the step being timed."""

    def __init__(self, name: str, config: BertConfig, args, device: torch.device):
        torch.manual_seed(0)
        self.name = name
        if name in ("ours", "ours_unpadded"):
            self.model = BertForPreTraining(config, unpad=name == "ours_unpadded").to(device)
            self.optimizer = make_optimizer(args.optimizer, self.model)
        else:
            import transformers

            hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
            self.model = transformers.BertForPreTraining(hf_config).to(device)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.01)
        self.model.train()
        self.device = device
        dtype = AUTOCAST_DTYPES[args.precision]
        self.autocast = (
            (lambda: torch.autocast(device.type, dtype=dtype))
            if dtype is not None
            else contextlib.nullcontext
        )
        self.scaler = grad_scaler(args.precision, device)
        self.rounds: list[tuple[float, float]] = []

    def loss(self, batch: dict) -> torch.Tensor:
        if self.name != "transformers":
            keys = ("input_ids", "token_type_ids", "attention_mask", "masked_lm_positions", "masked_lm_ids")
            return self.model(*(batch[key] for key in keys), batch["next_sentence_labels"]).loss
        return self.model(
            input_ids=batch["input_ids"],
            token_type_ids=batch["token_type_ids"],
            attention_mask=batch["attention_mask"],
            labels=batch["hf_labels"],
            next_sentence_label=batch["next_sentence_labels"],
        ).loss

    def step(self, batch: dict) -> tuple[float, float]:
        """One training step; returns the seconds spent in forward + backward and in the optimiser."""
        synchronize(self.device)
        start = time.perf_counter()
        with self.autocast():
            loss = self.loss(batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        synchronize(self.device)
        middle = time.perf_counter()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        synchronize(self.device)
        return middle - start, time.perf_counter() - middle

    def timed(self, batch: dict, steps: int) -> None:
        """A round of `steps` steps, kept as its mean (forward + backward, optimiser) seconds."""
        phases = [self.step(batch) for _ in range(steps)]
        self.rounds.append(tuple(sum(phase) / steps for phase in zip(*phases)))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_tflops(args, device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    if args.peak_tflops:
        return args.peak_tflops
    gpu = torch.cuda.get_device_name(device)
    for name, peaks in PEAK_TFLOPS.items():
        if name in gpu:
            return peaks[args.precision] or None
    return None


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    allow_tf32(device, args.precision)  # as training does
    config = BertConfig.resolve(args.size, args.vocab_size)
    batch = make_batch(config, args.batch, args.seq_len, device)
    masked_per_seq = batch["masked_lm_positions"].shape[1]
    flops_per_step = args.batch * training_flops_per_sequence(config, args.seq_len, masked_per_seq)
    peak = peak_tflops(args, device)

    runners = [Runner(name, config, args, device) for name in args.models.split(",")]
    for runner in runners:
        for _ in range(args.warmup):
            runner.step(batch)
    for _ in range(args.rounds):
        for runner in runners:
            runner.timed(batch, args.steps)

    results = {
        "size": args.size,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "masked_per_seq": masked_per_seq,
        "precision": args.precision,
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)",
        "optimizer": args.optimizer,
        "torch": torch.__version__,
        "model_tflops_per_step": flops_per_step / 1e12,
        "models": {},
    }
    print(
        f"{args.size} batch {args.batch} x {args.seq_len}, {args.precision}, {results['device']}, torch {torch.__version__}"
    )
    print(f"{'model':<14}{'seq/s':>10}{'ms/step':>10}{'fwd+bwd':>10}{'optim':>10}{'MFU':>8}")
    for runner in runners:
        # The fastest round counts (as in timeit): on a shared machine slower rounds time the neighbours.
        forward_backward, optimizer = min(runner.rounds, key=sum)
        seconds_per_step = forward_backward + optimizer
        entry = {
            "sequences_per_second": args.batch / seconds_per_step,
            "ms_per_step": 1000 * seconds_per_step,
            "ms_forward_backward": 1000 * forward_backward,
            "ms_optimizer": 1000 * optimizer,
            "ms_per_step_all_rounds": [round(1000 * sum(r), 1) for r in runner.rounds],
        }
        if peak:
            entry["mfu"] = flops_per_step / seconds_per_step / (peak * 1e12)
        results["models"][runner.name] = entry
        mfu = f"{100 * entry['mfu']:.1f}%" if "mfu" in entry else "-"
        print(
            f"{runner.name:<14}{entry['sequences_per_second']:>10.2f}{entry['ms_per_step']:>10.1f}"
            f"{entry['ms_forward_backward']:>10.1f}{entry['ms_optimizer']:>10.1f}{mfu:>8}"
        )
    if {"ours", "transformers"} <= results["models"].keys():
        # Each round timed the two models back to back: the median of the per-round ratios
        # resists the load of a shared machine better than a ratio of two separate figures.
        ours, theirs = (
            next(r for r in runners if r.name == name).rounds for name in ("ours", "transformers")
        )
        results["speedup"] = statistics.median(sum(t) / sum(o) for o, t in zip(ours, theirs))
        print(f"speed-up (ours / transformers, median of paired rounds): {results['speedup']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
