"""What the training loop's throughput figures (bert.training.throughput) cost: the step time of
bert.training.loop.train with the meter and with it switched off, paired in the same run.

    python bench/throughput_meter.py --size tiny --batch 32 --seq-len 128 --threads 2
    python bench/throughput_meter.py --size base --batch 8 --seq-len 128 --threads 2 --steps 5 --rounds 6

The loop runs pretraining steps (BertForPreTraining, the pretraining objective, AdamW) on
`--distinct` random batches of real lengths drawn between a quarter of `--seq-len` and all of it,
cut to their longest sequence as the loader cuts them. Each round trains `--steps` steps with the
meter and `--steps` without it (a stand-in that takes the batches and counts nothing), in
alternating order; a variant's step time is its `seconds` (the loop's own clock, after the peak is
found) over its steps. Reported: the median over rounds of the paired ratio (meter / off; a machine
shared with other work slows both alike within a round), each variant's fastest step, and the
meter's own time per step (its counting and FLOPs, timed inside it: the part of the ratio that is
not noise). The peak probe runs once per process, before any clock: its time is reported apart.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

import bert.training.loop  # noqa: E402
import bert.training.throughput  # noqa: E402
from bert.model.config import BertConfig  # noqa: E402
from bert.model.network import BertForPreTraining  # noqa: E402
from bert.pretraining.benchmark import masked_per_sequence  # noqa: E402
from bert.pretraining.loss import pretraining_objective  # noqa: E402
from bert.training.loop import RunRecord, train  # noqa: E402
from bert.training.optim import build_optimizer  # noqa: E402
from bert.training.recipe import Recipe, RunSettings  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="tiny", help="tiny | mini | base | large | path to a config.json")
    parser.add_argument("--vocab-size", type=int, default=8192, help="the demo's vocabulary")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20, help="steps per variant and round")
    parser.add_argument("--rounds", type=int, default=10, help="paired rounds")
    parser.add_argument("--log-every", type=int, default=10, help="the demo's pretrain.log_every")
    parser.add_argument("--distinct", type=int, default=8, help="distinct batches the loop cycles over")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    return parser.parse_args(argv)


def random_batches(config: BertConfig, count: int, batch: int, seq_len: int) -> list[dict]:
    """Pretraining batches in the loader's layout, with padding: each row's real length random."""
    g = torch.Generator().manual_seed(0)
    masked = masked_per_sequence(seq_len)
    batches = []
    for _ in range(count):
        lengths = torch.randint(seq_len // 4, seq_len + 1, (batch,), generator=g)
        width = int(lengths.max())
        mask = (torch.arange(width)[None] < lengths[:, None]).long()
        ids = torch.randint(5, config.vocab_size, (batch, width), generator=g) * mask
        positions = torch.stack(
            [torch.randperm(int(n) - 1, generator=g)[:masked] + 1 for n in lengths]
        ).sort(1).values  # fmt: skip
        labels = torch.randint(5, config.vocab_size, positions.shape, generator=g)
        batches.append(dict(input_ids=ids, token_type_ids=torch.zeros_like(ids), attention_mask=mask,
                            masked_lm_positions=positions, masked_lm_ids=labels,
                            next_sentence_labels=torch.randint(0, 2, (batch,), generator=g)))  # fmt: skip
    return batches


class TimedMeter(bert.training.throughput.ThroughputMeter):
    """The meter, timing its own work: take() less the loader's next(), and interval()."""

    own_seconds = 0.0  # over the process: main() starts it at 0

    def take(self, data, count):
        started, waited = time.perf_counter(), self.waited
        batches = super().take(data, count)
        loader = self.waited - waited
        TimedMeter.own_seconds += time.perf_counter() - started - loader
        return batches

    def interval(self, seconds, world_size):
        started = time.perf_counter()
        figures = super().interval(seconds, world_size)
        TimedMeter.own_seconds += time.perf_counter() - started
        return figures


class NoMeter:
    """The loop without the meter: the batches taken as before it, nothing counted or logged."""

    def __init__(self, *args, **kwargs):
        pass

    def take(self, data, count):
        return [next(data) for _ in range(count)]

    def interval(self, seconds, world_size):
        return {}

    def summary(self, seconds, world_size):
        return {}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = BertConfig.resolve(args.size, args.vocab_size)
    torch.manual_seed(0)
    model = BertForPreTraining(config).to(device)
    optimizer = build_optimizer(model, "adamw", 1e-4, 0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    batches = random_batches(config, args.distinct, args.batch, args.seq_len)
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    slots = sum(b["attention_mask"].numel() for b in batches)

    TimedMeter.own_seconds = 0.0
    started = time.perf_counter()
    peak = bert.training.throughput.device_peak(config, device, args.precision)
    probe_seconds = time.perf_counter() - started
    # The runs below find it again in bert.model.flops' per-process cache, as a run's second start would.

    recipe = Recipe(optimizer="adamw", learning_rate=1e-4, warmup_proportion=0.0, decay_power=0.0, schedule="poly",
                    decay_share=0.2, decay_shape="linear",
                    weight_decay=0.01, grad_clip=1.0, global_batch_size=args.batch,
                    micro_batch_size=args.batch, seed=0)  # fmt: skip
    settings = RunSettings(precision=args.precision, compile=False, length_binning=False, unpad=False,
                           log_every=args.log_every, save_every=10**9, keep_last=1, resume=False,
                           max_nonfinite_steps=10)  # fmt: skip
    record = RunRecord(checkpoint_dir=None, live_dir=None, metrics_file=None, description={}, execution={})

    def step_seconds(meter) -> tuple[float, dict]:
        bert.training.loop.ThroughputMeter = meter
        summary = train(model, batches, pretraining_objective, optimizer, scheduler, max_steps=args.steps,
                        recipe=recipe, settings=settings, record=record, progress=False)  # fmt: skip
        return summary["seconds"] / args.steps, summary

    times = {"meter": [], "off": []}
    try:
        step_seconds(NoMeter)  # warm-up
        for round_ in range(args.rounds):
            order = [("meter", TimedMeter), ("off", NoMeter)]
            for name, meter in order if round_ % 2 == 0 else order[::-1]:
                seconds, summary = step_seconds(meter)
                times[name].append(seconds)
                if name == "meter":
                    figures = summary
    finally:
        bert.training.loop.ThroughputMeter = bert.training.throughput.ThroughputMeter
    ratios = [m / o for m, o in zip(times["meter"], times["off"])]
    meter_steps = args.rounds * args.steps
    results = {
        "size": args.size, "batch": args.batch, "seq_len": args.seq_len, "precision": args.precision,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
        "torch": torch.__version__, "load_average": list(os.getloadavg()), "steps": args.steps, "rounds": args.rounds, "log_every": args.log_every,
        "padding_of_batches": 1 - tokens / slots,
        "ms_per_step": {name: 1e3 * min(values) for name, values in times.items()},
        "ratio_median": statistics.median(ratios), "ratios": ratios,
        "ratio_fastest": min(times["meter"]) / min(times["off"]),
        "meter_ms_per_step": 1e3 * TimedMeter.own_seconds / meter_steps,
        "meter_share_of_step": TimedMeter.own_seconds / meter_steps / statistics.median(times["meter"]),
        "peak": {"tflops": peak.tflops, "source": peak.source, "description": peak.description,
                 "probe_seconds": probe_seconds},
        "last_figures": {k: figures[k] for k in ("tokens_per_second", "padding_waste", "model_tflops_per_second",
                                                 "mfu", "data_wait_share")},
    }  # fmt: skip
    print(f"{args.size} batch {args.batch} x {args.seq_len} (padding {results['padding_of_batches']:.2f}), "
          f"{args.precision}, {results['device']}, torch {torch.__version__}; {args.rounds} rounds of {args.steps} steps")  # fmt: skip
    print(f"ms/step (fastest round): meter {results['ms_per_step']['meter']:.2f}, off {results['ms_per_step']['off']:.2f}; "
          f"fastest/fastest {results['ratio_fastest']:.4f}; paired ratio meter/off: median {results['ratio_median']:.4f} "
          f"(rounds {min(ratios):.3f} .. {max(ratios):.3f})")  # fmt: skip
    print(f"the meter's own time: {results['meter_ms_per_step']:.3f} ms/step = "
          f"{100 * results['meter_share_of_step']:.2f}% of a step")  # fmt: skip
    print(f"peak: {peak.description} {peak.tflops:.4g} TFLOP/s, found in {probe_seconds:.2f} s; last run: "
          + ", ".join(f"{k} {v:.4g}" for k, v in results["last_figures"].items()))  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
