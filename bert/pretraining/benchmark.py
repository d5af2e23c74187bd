"""Speed and MFU of one full pretraining step (forward, backward, optimiser step): our
BertForPreTraining (padded, and unpadded) against transformers.BertForPreTraining, or for a
ModernBertConfig our ModernBertForMaskedLM against transformers.ModernBertForMaskedLM, same config,
batch and device, in the same run. What the benchmark stage and bench/pretrain_step.py run.

Each sequence is full length (no padding, as most phase-1 sequences are) with the attention mask
passed anyway, `masked_per_seq` masked positions and (BERT) an NSP label. The models take turns, one
round of `steps` steps each, for `rounds` rounds: sequences/s come from each model's fastest round
(on a shared machine slower rounds time the neighbours), the speed-up is the median of the
per-round ratios (a shared machine slows both alike within a round). Model FLOPs are counted the
same for every model (bert.model.flops.pretraining_flops), and MFU is against the matmul peak measured
in the same process (bert.model.flops.matmul_peak).
"""

import contextlib
import statistics
import time
from collections.abc import Callable

import torch

from bert.model import family
from bert.model.config import BertConfig, ModernBertConfig
from bert.model.flops import MatmulPeak, best_peak, mfu, pretraining_flops
from bert.model.precision import AUTOCAST_DTYPES, grad_scaler
from bert.training.optim import build_optimizer

MODELS = ("ours", "ours_unpadded", "transformers")  # ours_unpadded: our model with unpad=True


def masked_per_sequence(
    seq_len: int, masked_lm_prob: float = 0.15, max_predictions: int | None = None
) -> int:
    """Masked positions of a full-length sequence, as the pretraining examples choose them."""
    masked = max(1, round(seq_len * masked_lm_prob))
    return masked if max_predictions is None else min(masked, max_predictions)


def make_batch(config: BertConfig | ModernBertConfig, batch: int, seq_len: int, masked_per_seq: int, device: torch.device,
               seed: int = 0) -> dict:  # fmt: skip
    """Full-length random sequences in the HDF5 shard layout (and transformers' -100 labels)."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, config.vocab_size, (batch, seq_len), generator=g)
    positions = (
        torch.stack([torch.randperm(seq_len - 1, generator=g)[:masked_per_seq] + 1 for _ in range(batch)])
        .sort(1)
        .values
    )
    labels = torch.randint(5, config.vocab_size, (batch, masked_per_seq), generator=g)
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


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def transformers_pretraining_model(config: BertConfig | ModernBertConfig) -> torch.nn.Module:
    """transformers' pretraining model of `config`'s family (SDPA attention), freshly initialised."""
    import transformers

    if family.family_of(config) == "modernbert":
        hf_config = transformers.ModernBertConfig.from_dict(config.to_dict(), attn_implementation="sdpa")
        return transformers.ModernBertForMaskedLM(hf_config)
    hf_config = transformers.BertConfig(**config.to_dict(), attn_implementation="sdpa")
    return transformers.BertForPreTraining(hf_config)


class Runner:
    """One model, its optimiser (`optimizer`, lamb or adamw, for every model) and the step being timed.
    The config's family picks the models: our BertForPreTraining and transformers', or our
    ModernBertForMaskedLM and transformers' (masked LM only: no token types, no next sentence)."""

    def __init__(
        self,
        name: str,
        config: BertConfig | ModernBertConfig,
        optimizer: str,
        precision: str,
        device: torch.device,
    ):
        torch.manual_seed(0)
        self.name = name
        self.family = family.family_of(config)
        if name in ("ours", "ours_unpadded"):
            self.model = family.fresh(config, "pretraining", unpad=name == "ours_unpadded").to(device)
        else:
            self.model = transformers_pretraining_model(config).to(device)
        # The same optimiser for every model, as pretrain@<phase> builds it (AdamW's fused kernel on
        # CPU too): at small sizes its step is much of the time.
        self.optimizer = build_optimizer(
            self.model, optimizer, learning_rate=1e-4, weight_decay=0.01, fused=True
        )
        self.model.train()
        self.device = device
        dtype = AUTOCAST_DTYPES[precision]
        self.autocast = (
            (lambda: torch.autocast(device.type, dtype=dtype))
            if dtype is not None
            else contextlib.nullcontext
        )
        self.scaler = grad_scaler(precision, device)
        self.rounds: list[tuple[float, float]] = []

    def loss(self, batch: dict) -> torch.Tensor:
        if self.name != "transformers":
            keys = ("input_ids", "token_type_ids", "attention_mask", "masked_lm_positions", "masked_lm_ids")
            next_sentence = batch["next_sentence_labels"] if self.family == "bert" else None
            return self.model(*(batch[key] for key in keys), next_sentence).loss
        if self.family == "modernbert":
            return self.model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                labels=batch["hf_labels"],
            ).loss
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


def time_pretraining(
    config: BertConfig | ModernBertConfig,
    batch_size: int,
    seq_len: int,
    masked_per_seq: int | None = None,
    models: tuple[str, ...] = ("ours", "transformers"),
    steps: int = 1,
    warmup: int = 2,
    rounds: int = 10,
    precision: str = "fp32",
    device: torch.device | str = "cpu",
    optimizer: str = "lamb",
    measure_peak: Callable[[], MatmulPeak] | None = None,
) -> dict:
    """Per model: sequences/s, ms per step (forward + backward, optimiser), model TFLOP/s and,
    given `measure_peak` (a matmul sweep, bert.model.flops.matmul_peak), MFU and the peak; `speedup`
    (ours / transformers) when both ran. The sweep takes its turn in every round, after the
    models, and its best counts, as each model's best round does: on a shared machine both then
    meet the same moments of load."""
    device = torch.device(device)
    if masked_per_seq is None:
        masked_per_seq = masked_per_sequence(seq_len)
    batch = make_batch(config, batch_size, seq_len, masked_per_seq, device)
    flops_per_step = pretraining_flops(config, [seq_len] * batch_size, masked_per_seq)
    runners = [Runner(name, config, optimizer, precision, device) for name in models]
    for runner in runners:
        for _ in range(warmup):
            runner.step(batch)
    peaks = []
    for _ in range(rounds):
        for runner in runners:
            runner.timed(batch, steps)
        if measure_peak is not None:
            peaks.append(measure_peak())
    peak = best_peak(*peaks) if peaks else None
    results = {
        "batch": batch_size,
        "seq_len": seq_len,
        "masked_per_seq": masked_per_seq,
        "precision": precision,
        "optimizer": optimizer,
        "model_tflops_per_step": flops_per_step / 1e12,
        "matmul_peak": peak.to_dict() if peak else None,
        "models": {},
    }
    for runner in runners:
        forward_backward, optimizer_seconds = min(runner.rounds, key=sum)
        seconds = forward_backward + optimizer_seconds
        results["models"][runner.name] = {
            "sequences_per_second": batch_size / seconds,
            "ms_per_step": 1000 * seconds,
            "ms_forward_backward": 1000 * forward_backward,
            "ms_optimizer": 1000 * optimizer_seconds,
            "ms_per_step_all_rounds": [round(1000 * sum(r), 1) for r in runner.rounds],
            "model_tflops_per_second": flops_per_step / seconds / 1e12,
            "mfu": mfu(flops_per_step, seconds, peak.tflops if peak else None),
        }
    if {"ours", "transformers"} <= set(models):
        ours, theirs = (
            next(r for r in runners if r.name == name).rounds for name in ("ours", "transformers")
        )
        results["speedup"] = statistics.median(sum(t) / sum(o) for o, t in zip(ours, theirs))
    return results
