"""SQuAD fine-tuning throughput: sequences/s of a full training step (forward, QA loss, backward,
gradient clipping, AdamW), as NVIDIA's finetune_train_benchmark measures it.

    python -m bench.squad_train --size base --batch 8 --seq-len 384 --precision fp32 [--threads 2]
    python -m bench.squad_train --model data/models/squad --batch 8 --seq-len 384
    python -m bench.squad_train --size base --squad data/squad/train.json --vocab data/vocab/vocab.txt

- Full-length sequences of random tokens (the default): the model alone, every window as long
  as the batch.
- `--squad TRAIN_JSON`: the training windows of a SQuAD file, batched three ways: padded to
  --seq-len (as transformers' run_qa and NVIDIA's run_squad feed them), random batches cut to
  their longest window (finetune_squad with `finetune.length_binning: false`), and length-binned
  (`true`, the default); the binned batches also through the unpadded encoder
  (`finetune.unpad: true`). For each: the share of token slots that hold padding over one whole
  epoch, and windows/s of training steps on `--steps` batches spread evenly over the epoch, the
  variants taking turns step by step (a shared machine slows all alike); the fastest of
  `--rounds` rounds counts. `--steps` at least the epoch's batches times them all.

The training step and the full-length timing live in bert/squad/benchmark.py (the benchmark
stage runs them too).
"""

import argparse
import json

import numpy as np
import torch

from bench.padding import padding_waste, to_full_length
from bert.model.config import BertConfig
from bert.model.network import BertForQuestionAnswering
from bert.model.precision import AUTOCAST_DTYPES
from bert.squad.benchmark import TrainingStep, dev_windows, time_training
from bert.squad.features import SquadFeatures
from bert.text.tokenization import load_tokenizer
from bert.training.finetune import FineTuningBatches


def benchmark_window_training(
    model: BertForQuestionAnswering,
    features: SquadFeatures,
    batch_size: int,
    steps: int,
    rounds: int = 2,
    precision: str = "fp32",
) -> dict:
    """Padding waste over an epoch, and windows/s of training steps, of the three batchings (and
    of the binned one through the unpadded encoder)."""
    seq_len = features.input_ids.shape[1]
    random_trimmed = list(FineTuningBatches(features.training_arrays(), batch_size, batch_size, seed=0))
    binned = list(
        FineTuningBatches(features.training_arrays(), batch_size, batch_size, seed=0, length_binning=True)
    )
    epochs = {
        "padded_to_max_length": [to_full_length(batch, seq_len) for batch in random_trimmed],
        "random_trimmed": random_trimmed,
        "length_binned": binned,
        "length_binned_unpadded": binned,  # the same batches; only the real tokens are computed
    }
    device = next(model.parameters()).device
    step = TrainingStep(model, precision)
    step({k: v.to(device) for k, v in epochs["padded_to_max_length"][0].items()})  # warm-up
    # Batches spread evenly over the epoch: the first few of an epoch need not be typical.
    timed = np.unique(np.linspace(0, len(epochs["length_binned"]) - 1, steps).round().astype(int))
    seconds = {name: [] for name in epochs}
    for _ in range(rounds):
        spent = dict.fromkeys(epochs, 0.0)
        for k in timed:
            for name, batches in epochs.items():
                model.bert.unpad = name.endswith("unpadded")
                spent[name] += step({key: value.to(device) for key, value in batches[k].items()})
        for name in epochs:
            seconds[name].append(spent[name])
    model.bert.unpad = False
    result = {
        name: {
            "padding_waste": padding_waste(batches),
            "windows_per_second": batch_size * len(timed) / min(seconds[name]),
        }
        for name, batches in epochs.items()
    }
    speed = {name: result[name]["windows_per_second"] for name in epochs}
    lengths = features.attention_mask.sum(1)
    return {
        "windows": len(features),
        "mean_window_length": float(np.mean(lengths)),
        **result,
        "speedup_vs_padded": speed["length_binned"] / speed["padded_to_max_length"],
        "speedup_vs_random_trimmed": speed["length_binned"] / speed["random_trimmed"],
        "unpadded_speedup_vs_binned": speed["length_binned_unpadded"] / speed["length_binned"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.squad_train", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a Hugging Face BERT directory")
    source.add_argument(
        "--size", choices=["tiny", "mini", "base", "large"], help="random weights of a preset"
    )
    parser.add_argument("--vocab-size", type=int, default=30522)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=384)
    parser.add_argument("--precision", choices=list(AUTOCAST_DTYPES), default="fp32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--squad", help="batch the training windows of this SQuAD file (see above)")
    parser.add_argument("--vocab", help="with --squad: vocab.txt (default: the model's)")
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--max-query-length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2, help="with --squad: rounds (fastest counts)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model:
        model = BertForQuestionAnswering.from_pretrained(args.model)
    else:
        model = BertForQuestionAnswering(BertConfig.preset(args.size, args.vocab_size))
    model.to(args.device)
    setting = {"model": args.model or args.size, "batch_size": args.batch, "seq_length": args.seq_len,
               "precision": args.precision, "device": args.device, "threads": torch.get_num_threads()}  # fmt: skip
    if args.squad:
        vocab = args.vocab or (f"{args.model}/vocab.txt" if args.model else None)
        if vocab is None:
            parser.error("--squad with --size needs --vocab")
        features = dev_windows(
            args.squad, load_tokenizer(vocab), args.seq_len, args.doc_stride, args.max_query_length
        )
        result = benchmark_window_training(
            model, features, args.batch, args.steps, args.rounds, args.precision
        )
        setting["squad"] = args.squad
    else:
        result = time_training(model, args.batch, args.seq_len, args.steps, args.warmup, args.precision)
    print(json.dumps({**setting, **result}, indent=2))


if __name__ == "__main__":
    main()
