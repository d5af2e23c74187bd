"""SQuAD inference throughput and latency: ours against transformers.BertForQuestionAnswering.

    python -m bench.squad_inference --size base --batch 8 --seq-len 384 --precision fp32 [--threads 2]
    python -m bench.squad_inference --model data/models/squad --batch 8 --seq-len 384
    python -m bench.squad_inference --model data/models/squad --squad data/squad/dev.json --seq-len 384

Two measurements, both with transformers (attn_implementation="sdpa") running the same weights,
loaded from the same Hugging Face directory, in the same process; the ratio is ours / theirs.

- Full-length sequences of random tokens (the default): `--warmup` untimed batches, then
  `--steps` timed ones; sequences/s and per-batch latency p50/p99, at the given batch and at
  batch 1. This compares the models alone: every sequence is as long as the batch.
- `--squad DEV_JSON`: the windows of a SQuAD file (`--seq-len`, `--doc-stride`,
  `--max-query-length`, tokenised with the model's vocab.txt or `--vocab`), as NVIDIA's
  finetune_inference_benchmark runs the dev set. Ours runs them as `predict_squad` does
  (bert.finetune.predict_logits: longest first, each batch cut to its longest window);
  transformers as its run_qa example does by default (`pad_to_max_length`: every window padded
  to --seq-len, in file order), and also with dynamic padding (file order, each batch cut to its
  longest window). Windows/s; `--windows N` times a seeded sample of N windows.

With --size the weights are random (a fresh model saved to a temporary directory).
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bert.finetune import predict_logits
from bert.modeling import BertConfig, BertForQuestionAnswering
from bert.predict import read_lower_case
from bert.squad import SquadFeatures, load_examples, make_features
from bert.tokenization import load_tokenizer

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


def dev_windows(
    squad_file: str | Path,
    tokenizer,
    seq_len: int,
    doc_stride: int,
    max_query_length: int,
    windows: int | None = None,
    seed: int = 0,
) -> SquadFeatures:
    """The windows of a SQuAD file, as predict_squad makes them; a seeded sample of `windows`."""
    features = make_features(
        load_examples(squad_file), tokenizer, seq_len, doc_stride, max_query_length, progress=False
    )
    if windows is None or windows >= len(features):
        return features
    pick = np.sort(np.random.default_rng(seed).choice(len(features), windows, replace=False))
    return features.select(pick)


def logits_in_file_order(
    model, features: SquadFeatures, batch_size: int, device: torch.device, precision: str, trim: bool
) -> np.ndarray:
    """Start logits [F, S] the way transformers' run_qa example runs the dev set: batches in file
    order, padded to the full length (trim=False, its default pad_to_max_length) or cut to each
    batch's longest window (trim=True, its dynamic padding)."""
    amp_dtype = PRECISIONS[precision]
    num_windows, seq_len = features.input_ids.shape
    start_logits = np.full((num_windows, seq_len), -np.inf, dtype=np.float32)
    model.eval()
    with torch.inference_mode(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        for first in range(0, num_windows, batch_size):
            rows = slice(first, first + batch_size)
            length = int(features.attention_mask[rows].sum(1).max()) if trim else seq_len
            inputs = {
                name: torch.from_numpy(getattr(features, name)[rows, :length]).long().to(device)
                for name in ("input_ids", "token_type_ids", "attention_mask")
            }
            start_logits[rows, :length] = model(**inputs).start_logits.float().cpu().numpy()
    return start_logits


def benchmark_dev_inference(
    directory: str | Path,
    features: SquadFeatures,
    batch_size: int,
    rounds: int = 2,
    precision: str = "fp32",
    device: torch.device | str = "cpu",
    compare: bool = True,
) -> dict:
    """Windows/s over `features`: ours as predict_squad runs them, transformers padded to the full
    length and with dynamic padding, taking turns for `rounds` rounds (the fastest round counts),
    after one untimed batch each. Also the largest difference between the two models' start
    logits at real tokens: the speed-up is for the same answers."""
    device = torch.device(device)
    ours = BertForQuestionAnswering.from_pretrained(directory).to(device)
    runs = {"ours": lambda: predict_logits(ours, features, batch_size, device, precision, progress=False)[0]}
    if compare:
        theirs = load_transformers(directory, device)
        runs["transformers"] = lambda: logits_in_file_order(
            theirs, features, batch_size, device, precision, False
        )
        runs["transformers_dynamic_padding"] = lambda: logits_in_file_order(
            theirs, features, batch_size, device, precision, True
        )
    warmup = features.select(slice(batch_size))
    predict_logits(ours, warmup, batch_size, device, precision, progress=False)
    if compare:
        logits_in_file_order(theirs, warmup, batch_size, device, precision, trim=False)
    seconds = {name: [] for name in runs}
    logits = {}
    for _ in range(rounds):
        for name, run in runs.items():
            _sync(device)
            started = time.perf_counter()
            logits[name] = run()
            _sync(device)
            seconds[name].append(time.perf_counter() - started)
    lengths = features.attention_mask.sum(1)
    result = {
        "windows": len(features),
        "mean_window_length": float(lengths.mean()),
        "padding_at_full_length": float(1 - lengths.mean() / features.attention_mask.shape[1]),
        **{name: {"windows_per_second": len(features) / min(times)} for name, times in seconds.items()},
    }
    if compare:
        real = features.attention_mask.astype(bool)
        result["max_start_logit_difference"] = float(
            np.abs(logits["ours"][real] - logits["transformers"][real]).max()
        )
        ours_speed = result["ours"]["windows_per_second"]
        result["speedup"] = ours_speed / result["transformers"]["windows_per_second"]
        result["speedup_vs_dynamic_padding"] = (
            ours_speed / result["transformers_dynamic_padding"]["windows_per_second"]
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
    parser.add_argument("--squad", help="time the windows of this SQuAD file instead of random tokens")
    parser.add_argument("--vocab", help="with --squad: vocab.txt (default: the model's)")
    parser.add_argument("--cased", action="store_true", help="with --squad and --vocab: do not lower-case")
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-query-length", type=int, default=64)
    parser.add_argument("--windows", type=int, help="with --squad: time a seeded sample of this many windows")
    parser.add_argument(
        "--rounds", type=int, default=2, help="with --squad: alternating rounds (fastest counts)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    directory = Path(args.model) if args.model else random_model_dir(args.size, args.vocab_size)
    setting = {"model": str(args.model or args.size), "batch_size": args.batch, "seq_length": args.seq_len,
               "precision": args.precision, "device": args.device, "threads": torch.get_num_threads()}  # fmt: skip
    compare = not args.no_transformers
    if args.squad:
        vocab = Path(args.vocab) if args.vocab else directory / "vocab.txt"
        if not vocab.is_file():
            parser.error(f"{vocab}: no vocabulary; pass --vocab")
        tokenizer = load_tokenizer(vocab, not args.cased if args.vocab else read_lower_case(directory))
        features = dev_windows(
            args.squad, tokenizer, args.seq_len, args.doc_stride, args.max_query_length, args.windows
        )
        result = benchmark_dev_inference(
            directory, features, args.batch, args.rounds, args.precision, args.device, compare
        )
        setting["squad"] = args.squad
    else:
        result = benchmark_inference(
            directory, args.batch, args.seq_len, args.steps, args.warmup, args.precision, args.device, compare
        )
    print(json.dumps({**setting, **result}, indent=2))


if __name__ == "__main__":
    main()
