"""SQuAD inference throughput and latency: ours against transformers.BertForQuestionAnswering.

    python -m bench.squad_inference --size base --batch 8 --seq-len 384 --precision fp32 [--threads 2]
    python -m bench.squad_inference --model data/models/squad --batch 8 --seq-len 384

As NVIDIA's finetune_inference_benchmark does: full sequences of random tokens, `--warmup`
untimed batches, then `--steps` timed ones; sequences/s and per-batch latency p50/p99, at the
given batch and at batch 1. transformers (attn_implementation="sdpa") runs the same weights,
loaded from the same Hugging Face directory, in the same process; the ratio is ours / theirs.
With --size the weights are random (a fresh model saved to a temporary directory).
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bert.modeling import BertConfig, BertForQuestionAnswering

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def random_inputs(
    vocab_size: int, batch_size: int, seq_len: int, device: torch.device, seed: int = 0
) -> dict:
    """A batch of full-length [CLS] question [SEP] context [SEP]-shaped inputs (random tokens)."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq_len // 4 :] = 1
    attention_mask = torch.ones_like(input_ids)
    return {
        "input_ids": input_ids.to(device),
        "token_type_ids": token_type_ids.to(device),
        "attention_mask": attention_mask.to(device),
    }


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_inference(models: dict, inputs: dict, steps: int, warmup: int, precision: str = "fp32") -> dict:
    """sequences/s and latency (ms per batch, p50 and p99) of each `model(**inputs)` in eval mode.
    The models take turns batch by batch, so on a shared machine they see the same load."""
    device = inputs["input_ids"].device
    amp_dtype = PRECISIONS[precision]
    batch_size = len(inputs["input_ids"])
    latencies = {name: [] for name in models}
    with torch.inference_mode(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        for step in range(warmup + steps):
            for name, model in models.items():
                model.eval()
                _sync(device)
                started = time.perf_counter()
                model(**inputs)
                _sync(device)
                if step >= warmup:
                    latencies[name].append(time.perf_counter() - started)
    return {
        name: {
            "sequences_per_second": batch_size * len(times) / sum(times),
            "latency_p50_ms": 1000 * float(np.percentile(times, 50)),
            "latency_p99_ms": 1000 * float(np.percentile(times, 99)),
        }
        for name, times in latencies.items()
    }


def load_transformers(directory: str | Path, device: torch.device):
    """The same Hugging Face directory in transformers, with PyTorch's SDPA attention."""
    import transformers

    model = transformers.BertForQuestionAnswering.from_pretrained(str(directory), attn_implementation="sdpa")
    return model.to(device).eval()


def benchmark_inference(
    directory: str | Path,
    batch_size: int,
    seq_len: int,
    steps: int,
    warmup: int,
    precision: str = "fp32",
    device: torch.device | str = "cpu",
    compare: bool = True,
) -> dict:
    """Ours (and with `compare` transformers, taking turns) at batch_size and at 1, and the ratio."""
    device = torch.device(device)
    models = {"ours": BertForQuestionAnswering.from_pretrained(directory).to(device)}
    if compare:
        models["transformers"] = load_transformers(directory, device)
    vocab_size = models["ours"].config.vocab_size
    batched = time_inference(
        models, random_inputs(vocab_size, batch_size, seq_len, device), steps, warmup, precision
    )
    single = time_inference(models, random_inputs(vocab_size, 1, seq_len, device), steps, warmup, precision)
    result = {name: {**batched[name], **_prefixed("batch1_", single[name])} for name in models}
    if compare:
        result["speedup"] = (
            result["ours"]["sequences_per_second"] / result["transformers"]["sequences_per_second"]
        )
    return result


def _prefixed(prefix: str, figures: dict) -> dict:
    return {prefix + key: value for key, value in figures.items()}


def random_model_dir(size: str, vocab_size: int, seed: int = 0) -> Path:
    """A fresh BertForQuestionAnswering of a preset size, saved where both libraries can load it."""
    torch.manual_seed(seed)
    directory = Path(tempfile.mkdtemp(prefix=f"bench-{size}-"))
    BertForQuestionAnswering(BertConfig.preset(size, vocab_size)).save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.squad_inference", description=__doc__.split("\n\n")[0]
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a Hugging Face BERT directory (e.g. data/models/squad)")
    source.add_argument(
        "--size", choices=["tiny", "mini", "base", "large"], help="random weights of a preset"
    )
    parser.add_argument("--vocab-size", type=int, default=30522, help="with --size (default 30522)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=384)
    parser.add_argument("--precision", choices=list(PRECISIONS), default="fp32")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (CPU)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers comparison")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    directory = Path(args.model) if args.model else random_model_dir(args.size, args.vocab_size)
    result = benchmark_inference(
        directory, args.batch, args.seq_len, args.steps, args.warmup, args.precision, args.device,
        compare=not args.no_transformers,
    )  # fmt: skip
    setting = {"model": str(args.model or args.size), "batch_size": args.batch, "seq_length": args.seq_len,
               "precision": args.precision, "device": args.device, "threads": torch.get_num_threads()}  # fmt: skip
    print(json.dumps({**setting, **result}, indent=2))


if __name__ == "__main__":
    main()
