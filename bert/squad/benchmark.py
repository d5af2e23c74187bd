"""Speed of a question-answering model, ours against transformers' class of its family
(BertForQuestionAnswering or ModernBertForQuestionAnswering) with SDPA attention (same weights,
loaded from the same Hugging Face directory, in the same process, taking turns so that a shared
machine slows both alike): what the benchmark stage measures, and what bench/squad_inference.py,
bench/squad_train.py and bench/report.py run.

- `benchmark_inference`: full-length sequences of random tokens (the models alone); sequences/s
  and per-batch latency p50/p99, at a batch size and at batch 1.
- `benchmark_dev_inference`: the windows of a SQuAD file (`dev_windows`), as NVIDIA's
  finetune_inference_benchmark runs the dev set. Ours runs them as predict_squad does
  (`predict_logits`: longest first, each batch cut to its longest window); transformers as its
  run_qa example does by default (`pad_to_max_length`: every window padded to the full length,
  in file order), and also with dynamic padding (file order, each batch cut to its longest window).
- `time_training`: sequences/s of a full fine-tuning step (`TrainingStep`), as NVIDIA's
  finetune_train_benchmark measures it.
"""

import time
from pathlib import Path

import numpy as np
import torch

from bert.model import family
from bert.model.precision import AUTOCAST_DTYPES
from bert.squad.dataset import load_examples
from bert.squad.features import SquadFeatures, make_features
from bert.squad.predict import predict_logits
from bert.training.optim import build_optimizer


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


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a timer around it measures the work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_inference(models: dict, inputs: dict, steps: int, warmup: int, precision: str = "fp32") -> dict:
    """sequences/s and latency (ms per batch, p50 and p99) of each `model(**inputs)` in eval mode.
    The models take turns batch by batch, so on a shared machine they see the same load."""
    device = inputs["input_ids"].device
    amp_dtype = AUTOCAST_DTYPES[precision]
    batch_size = len(inputs["input_ids"])
    latencies = {name: [] for name in models}
    with torch.inference_mode(), torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        for step in range(warmup + steps):
            for name, model in models.items():
                model.eval()
                synchronize(device)
                started = time.perf_counter()
                model(**inputs)
                synchronize(device)
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

    # config.json's model_type picks transformers' class, as bert.model.family picks ours
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(
        str(directory), attn_implementation="sdpa"
    )
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
    models = {"ours": family.from_pretrained(directory, "question_answering").to(device)}
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
        load_examples(squad_file),
        tokenizer,
        max_seq_length=seq_len,
        doc_stride=doc_stride,
        max_query_length=max_query_length,
        progress=False,
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
    amp_dtype = AUTOCAST_DTYPES[precision]
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
    ours = family.from_pretrained(directory, "question_answering").to(device)
    runs = {
        "ours": lambda: predict_logits(
            ours, features, batch_size=batch_size, device=device, precision=precision, progress=False
        )[0]
    }
    if compare:
        theirs = load_transformers(directory, device)
        runs["transformers"] = lambda: logits_in_file_order(
            theirs, features, batch_size, device, precision, False
        )
        runs["transformers_dynamic_padding"] = lambda: logits_in_file_order(
            theirs, features, batch_size, device, precision, True
        )
    warmup = features.select(slice(batch_size))
    predict_logits(ours, warmup, batch_size=batch_size, device=device, precision=precision, progress=False)
    if compare:
        logits_in_file_order(theirs, warmup, batch_size, device, precision, trim=False)
    seconds = {name: [] for name in runs}
    logits = {}
    for _ in range(rounds):
        for name, run in runs.items():
            synchronize(device)
            started = time.perf_counter()
            logits[name] = run()
            synchronize(device)
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


class TrainingStep:
    """One fine-tuning step as finetune_squad takes it (bert.training.loop.train): autocast forward,
    QA loss, (scaled) backward, gradient clipping at 1.0, AdamW."""

    def __init__(self, model: torch.nn.Module, precision: str = "fp32"):
        self.model = model.train()
        self.device = next(model.parameters()).device
        self.amp_dtype = AUTOCAST_DTYPES[precision]
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision == "fp16")
        self.optimizer = build_optimizer(model, "adamw", 3e-5, 0.01, fused=self.device.type == "cuda")

    def __call__(self, batch: dict) -> float:
        """Runs the step on `batch` and returns its seconds (the device synchronised)."""
        synchronize(self.device)
        started = time.perf_counter()
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
            loss = self.model(**batch).loss
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        synchronize(self.device)
        return time.perf_counter() - started


def time_training(model: torch.nn.Module, batch_size: int, seq_len: int, steps: int, warmup: int,
                  precision: str = "fp32") -> dict:  # fmt: skip
    """sequences/s of `steps` timed training steps after `warmup` untimed ones (the model changes)."""
    device = next(model.parameters()).device
    step = TrainingStep(model, precision)
    inputs = random_inputs(model.config.vocab_size, batch_size, seq_len, device)
    generator = torch.Generator().manual_seed(1)
    inputs["start_positions"] = torch.randint(seq_len // 4, seq_len, (batch_size,), generator=generator).to(
        device
    )
    inputs["end_positions"] = inputs["start_positions"]
    for _ in range(warmup):
        step(inputs)
    seconds = sum(step(inputs) for _ in range(steps))
    return {"sequences_per_second": batch_size * steps / seconds}
