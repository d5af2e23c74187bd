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
  (bert.squad.predict.predict_logits: longest first, each batch cut to its longest window);
  transformers as its run_qa example does by default (`pad_to_max_length`: every window padded
  to --seq-len, in file order), and also with dynamic padding (file order, each batch cut to its
  longest window). Windows/s; `--windows N` times a seeded sample of N windows.

With --size the weights are random (a fresh model saved to a temporary directory). The
measurements live in bert/squad/benchmark.py (the benchmark stage runs them too).
"""

import argparse
import json
import tempfile
from pathlib import Path

import torch

from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from bert.model.precision import AUTOCAST_DTYPES
from bert.squad.benchmark import benchmark_dev_inference, benchmark_inference, dev_windows
from bert.text.tokenization import load_tokenizer, load_tokenizer_from_dir


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
    parser.add_argument("--precision", choices=list(AUTOCAST_DTYPES), default="fp32")
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
        if args.vocab:
            tokenizer = load_tokenizer(vocab, lower_case=not args.cased)
        else:
            tokenizer, _ = load_tokenizer_from_dir(directory)
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
