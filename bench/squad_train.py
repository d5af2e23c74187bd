"""SQuAD fine-tuning throughput: sequences/s of a full training step (forward, QA loss, backward,
gradient clipping, AdamW), as NVIDIA's finetune_train_benchmark measures it.

    python -m bench.squad_train --size base --batch 8 --seq-len 384 --precision fp32 [--threads 2]
    python -m bench.squad_train --model data/models/squad --batch 8 --seq-len 384
"""

import argparse
import json
import time

import torch

from bench.squad_inference import PRECISIONS, random_inputs
from bert.modeling import BertConfig, BertForQuestionAnswering
from bert.optim import build_optimizer


def time_training(model: BertForQuestionAnswering, batch_size: int, seq_len: int, steps: int, warmup: int,
                  precision: str = "fp32") -> dict:  # fmt: skip
    """sequences/s of `steps` timed training steps after `warmup` untimed ones (the model changes)."""
    device = next(model.parameters()).device
    amp_dtype = PRECISIONS[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    optimizer = build_optimizer(model, "adamw", 3e-5, 0.01, fused=True)
    inputs = random_inputs(model.config.vocab_size, batch_size, seq_len, device)
    generator = torch.Generator().manual_seed(1)
    inputs["start_positions"] = torch.randint(seq_len // 4, seq_len, (batch_size,), generator=generator).to(
        device
    )
    inputs["end_positions"] = inputs["start_positions"]
    model.train()
    for step in range(warmup + steps):
        if step == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = model(**inputs).loss
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return {"sequences_per_second": batch_size * steps / (time.perf_counter() - started)}


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
    parser.add_argument("--precision", choices=list(PRECISIONS), default="fp32")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model:
        model = BertForQuestionAnswering.from_pretrained(args.model)
    else:
        model = BertForQuestionAnswering(BertConfig.preset(args.size, args.vocab_size))
    model.to(args.device)
    result = time_training(model, args.batch, args.seq_len, args.steps, args.warmup, args.precision)
    print(json.dumps({"model": args.model or args.size, "batch_size": args.batch, "seq_length": args.seq_len,
                      "precision": args.precision, "device": args.device, "threads": torch.get_num_threads(),
                      **result}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
