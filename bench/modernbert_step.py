"""One ModernBERT masked-LM training step (forward, backward, AdamW step): our
ModernBertForMaskedLM (bert/model/modernbert.py) against transformers' ModernBertForMaskedLM, same
weights, batch and device, in the same run; each with its fused AdamW (ours as pretraining builds it,
theirs as transformers' Trainer does by default).

    python bench/modernbert_step.py --threads 2                                  # base at 512 and 1024, CPU
    python bench/modernbert_step.py --threads 2 --layers 3 --rounds 2            # a quick look
    python bench/modernbert_step.py --device cuda --precision bf16 --batch 16    # on a GPU

Each sequence is full length with the attention mask passed anyway, and 30% of its tokens masked
(ModernBERT's pretraining rate). Ours computes its prediction head and vocabulary projection on the
masked tokens only; transformers on every token (its default: sparse_prediction is off). The two
models take turns, one step each per round: the ratio printed is the median of the per-round ratios
(a machine shared with other work slows both alike within a round), and each model's seconds per
step are medians too. Model TFLOP/s count the same FLOPs for both (bert.model.flops.pretraining_flops:
work nobody asked for earns no credit).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from bert.model.config import ModernBertConfig  # noqa: E402
from bert.model.flops import pretraining_flops  # noqa: E402
from bert.model.modernbert import ModernBertForMaskedLM  # noqa: E402
from bert.model.modernbert_hf import to_hf_state_dict  # noqa: E402
from bert.model.precision import AUTOCAST_DTYPES  # noqa: E402
from bert.pretraining.benchmark import transformers_pretraining_model  # noqa: E402
from bert.training.optim import build_optimizer  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="modernbert-base", help="modernbert-tiny | -base | -large")
    parser.add_argument(
        "--layers", type=int, default=None, help="fewer layers than the preset's, for a quick run"
    )
    parser.add_argument("--seq-lens", default="512,1024")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--mask-rate", type=float, default=0.3)
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed rounds, one step of each model per round"
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per model first")
    parser.add_argument("--precision", choices=list(AUTOCAST_DTYPES), default="fp32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    return parser.parse_args(argv)


def the_two_models(config: ModernBertConfig, device: torch.device):
    """Ours, freshly initialised, and transformers' with the same weights."""
    torch.manual_seed(0)
    ours = ModernBertForMaskedLM(config).to(device).train()
    theirs = transformers_pretraining_model(config).to(device).train()
    missing, unexpected = theirs.load_state_dict(to_hf_state_dict(ours), strict=False)
    if set(missing) - {"decoder.weight"} or unexpected:  # the decoder's weight is tied to the embeddings
        raise RuntimeError(f"weights do not map: missing {missing}, unexpected {unexpected}")
    return ours, theirs


def a_batch(config: ModernBertConfig, batch: int, seq_len: int, mask_rate: float, device: torch.device):
    """Full-length sequences with round(mask_rate x seq_len) masked positions each (never 0)."""
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, config.vocab_size, (batch, seq_len), generator=generator)
    masked = round(mask_rate * seq_len)
    positions = torch.stack(
        [torch.randperm(seq_len - 1, generator=generator)[:masked] + 1 for _ in range(batch)]
    )
    positions = positions.sort(1).values
    labels = torch.randint(5, config.vocab_size, positions.shape, generator=generator)
    dense_labels = torch.full_like(input_ids, -100).scatter(1, positions, labels)  # transformers' form
    tensors = dict(input_ids=input_ids, mask=torch.ones_like(input_ids), positions=positions, labels=labels,
                   dense_labels=dense_labels)  # fmt: skip
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def step_functions(ours, theirs, batch: dict, precision: str, device: torch.device):
    """One training step of each model, as a function of no arguments that returns when it is done."""
    dtype = AUTOCAST_DTYPES[precision]
    # Ours: the optimizer pretrain@<phase> builds for `pretrain.optimizer: adamw` (parameter groups,
    # torch's fused kernel on CUDA and CPU alike). Theirs: torch's fused AdamW, what transformers'
    # Trainer gives by default (optim adamw_torch_fused with torch >= 2.8).
    optimisers = {
        id(ours): build_optimizer(ours, "adamw", learning_rate=1e-5, weight_decay=0.01, fused=True),
        id(theirs): torch.optim.AdamW(theirs.parameters(), lr=1e-5, weight_decay=0.01, fused=True),
    }

    def finish(model, loss):
        loss.backward()
        optimisers[id(model)].step()
        optimisers[id(model)].zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def ours_step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = ours(batch["input_ids"], None, batch["mask"], batch["positions"], batch["labels"]).loss
        finish(ours, loss)

    def theirs_step():
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = theirs(
                input_ids=batch["input_ids"], attention_mask=batch["mask"], labels=batch["dense_labels"]
            ).loss
        finish(theirs, loss)

    return ours_step, theirs_step


def timed(step) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def bench(args, config: ModernBertConfig, seq_len: int, device: torch.device) -> dict:
    ours, theirs = the_two_models(config, device)
    batch = a_batch(config, args.batch, seq_len, args.mask_rate, device)
    ours_step, theirs_step = step_functions(ours, theirs, batch, args.precision, device)
    for _ in range(args.warmup):
        ours_step(), theirs_step()
    rounds = [(timed(ours_step), timed(theirs_step)) for _ in range(args.rounds)]
    flops = pretraining_flops(config, [seq_len] * args.batch, round(args.mask_rate * seq_len))
    ours_s, theirs_s = (statistics.median(times) for times in zip(*rounds, strict=True))
    return {
        "seq_len": seq_len,
        "ours_s": ours_s,
        "transformers_s": theirs_s,
        "speedup": statistics.median(theirs / mine for mine, theirs in rounds),
        "ours_tflops": flops / ours_s / 1e12,
        "transformers_tflops": flops / theirs_s / 1e12,
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = ModernBertConfig.preset(args.size, 50368)
    if args.layers:
        config = ModernBertConfig.from_dict(
            {**config.to_dict(), "num_hidden_layers": args.layers, "layer_types": None}
        )
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads)"
    )
    print(f"{args.size}, {config.num_hidden_layers} layers, batch {args.batch}, {args.precision}, {where}, "
          f"median of {args.rounds} rounds")  # fmt: skip
    print(
        "| seq len | ours s/step | transformers s/step | ours / transformers speed | ours TFLOP/s | transformers TFLOP/s |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for seq_len in (int(n) for n in args.seq_lens.split(",")):
        row = bench(args, config, seq_len, device)
        print(f"| {row['seq_len']} | {row['ours_s']:.2f} | {row['transformers_s']:.2f} | {row['speedup']:.3f}x | "
              f"{row['ours_tflops']:.3f} | {row['transformers_tflops']:.3f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
