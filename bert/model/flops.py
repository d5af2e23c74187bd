"""MFU's numerator and denominator: the model FLOPs of a step, and the device's measured matmul peak.

    MFU = model FLOPs per step / seconds per step / measured peak FLOP/s

Model FLOPs count the matmuls the loss needs, 2 FLOPs per multiply-add, for the model as
BertForPreTraining, BertForQuestionAnswering and the classifiers run it:

- per encoder layer and token: the QKV, output and two feed-forward projections, 4H² + 2H·I;
  per query token, attention's scores and weighted sum over the sequence's keys, 2·S·H;
- the heads: pooler (H²) and NSP (2H) on [CLS]; the MLM transform (H²) and vocabulary projection
  (H·V) on the masked tokens only; the QA start/end projection (2H) on every token; a classifier
  (H·labels) on [CLS];
- where the heads read only some rows (pretraining: [CLS] and the masked tokens; classification:
  [CLS]), the last layer counts keys and values (2H²) for every token and the rest for those rows;
- backward = 2 x forward (a gradient for the input and one for the weight, each a matmul of the
  forward's size; attention's backward is four matmuls for the forward's two), so a training
  step is 3 x its forward.

Not counted: embedding look-ups, LayerNorm, softmax, GELU, dropout, residual adds, the losses and
the optimiser (elementwise work, a few % of the FLOPs; time spent there lowers MFU, as it should).

ModernBERT (bert/model/modernbert.py; the same functions, given a ModernBertConfig) differs where its
blocks do: per layer and token 4H² + 3H·I (GeGLU's two input projections, 2H·I, and its output,
H·I); attention counted over the keys a query may see, the whole sequence in a global layer and
the band of its window in a local one (what the model needs, not what a masked dense kernel
spends); no token types, pooler or NSP; every layer on every row (its encoder skips none); the heads
add the prediction head's dense layer (H²) where they read: the masked tokens (with the vocabulary
projection), every token (QA, with its 2H), or the pooled sequence (a classifier).

`lengths` are the tokens each sequence is computed on: the batch width for every sequence of a
padded batch (`token_counts(mask, padded=True)`: what the padded path computes), the real tokens
for an unpadded one (`padded=False`: what the unpadded path computes, and the work the data
needs). Work nobody asked for earns no credit: `transformers`, which runs the vocabulary
projection on every token, gets the same count as our model for the same batch.

The benchmarks' peak (`matmul_peak`) is measured, not read from a data sheet: the best rate of dense matmuls at
the model's own shapes (tokens x H x H, tokens x H x I, tokens x I x H) in the run's precision,
on the same device and in the same process as the model, so MFU says how close a step comes to
what this machine does on plain matmuls (on a shared CPU, under the same load). A training run's
live MFU and its summary divide by one peak per machine (`device_peak`): the user's
($BERT_PEAK_TFLOPS), a known GPU's data sheet (the figure published MFUs use), this machine's
measurement (`python -m bert.model.flops --measure-peak`, kept outside the project), or, failing
those, a probe at the run's start, and the metrics say which (`peak_source`).
"""

import argparse
import datetime
import json
import math
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bert.atomic import write_json
from bert.errors import UserError, first_line, run_main
from bert.model.config import GLOBAL, BertConfig, ModernBertConfig
from bert.model.precision import AUTOCAST_DTYPES

Lengths = int | Sequence[int] | torch.Tensor


def token_counts(attention_mask: torch.Tensor, padded: bool) -> list[int]:
    """Tokens computed per sequence of an [N, S] (or [N, C, S]) batch: S each when padded, else
    its real length."""
    rows = attention_mask.reshape(-1, attention_mask.shape[-1])
    return [rows.shape[1]] * rows.shape[0] if padded else rows.sum(1).tolist()


def real_lengths(attention_mask: torch.Tensor) -> np.ndarray:
    """Real (non-padding) tokens per sequence of an [N, S] (or [N, C, S]) batch on the host, as an
    array: what the training loop's throughput meter counts, without a device round trip."""
    rows = attention_mask.reshape(
        -1, attention_mask.shape[-1]
    ).numpy()  # NumPy: a few µs, torch's ops cost more here
    return rows.sum(1, dtype=np.int64)


def _as_array(values: Lengths) -> np.ndarray:
    """Per-sequence counts as int64 (sums of them stay exact; a step's FLOPs are summed in Python ints)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _per_sequence(values: Lengths, sequences: int) -> np.ndarray:
    """One count per sequence: a single number stands for every sequence."""
    values = _as_array(values)
    if len(values) == 1 < sequences:
        return np.repeat(values, sequences)
    if len(values) != sequences:
        raise ValueError(f"{len(values)} counts for {sequences} sequences")
    return values


def encoder_flops(config: BertConfig, lengths: Lengths, read_rows: Lengths | None = None) -> float:
    """Forward FLOPs of the encoder over sequences of `lengths` tokens. `read_rows`, per sequence:
    the rows the heads read, which is all the last layer computes besides keys and values."""
    if isinstance(config, ModernBertConfig):
        return _modernbert_encoder_flops(config, lengths)
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    s = _as_array(lengths)
    r = s if read_rows is None else _per_sequence(read_rows, len(s))
    projections = 4 * h * h + 2 * h * i  # multiply-adds per token and layer
    # Per sequence: (layers - 1) x s x (projections + 2sh) for every row of the layers before the
    # last, and in the last 2h² x s (keys, values) + r x (projections - 2h² + 2sh): a polynomial in
    # s and r, so the batch's sums give it at once (the training loop counts every micro-batch).
    sum_s, sum_ss, sum_r, sum_rs = (int(x.sum()) for x in (s, s * s, r, r * s))
    every_row = (layers - 1) * (projections * sum_s + 2 * h * sum_ss)
    last_layer = 2 * h * h * sum_s + (projections - 2 * h * h) * sum_r + 2 * h * sum_rs
    return 2.0 * (every_row + last_layer)


def band_pairs(lengths: np.ndarray, radius: int) -> np.ndarray:
    """Per sequence, the (query, key) pairs of a local layer: |q - k| <= radius within s tokens,
    s on the diagonal and s - d on each side at each distance d <= min(radius, s - 1)."""
    d = np.minimum(radius, lengths - 1)
    return lengths + 2 * (d * lengths - d * (d + 1) // 2)


def _modernbert_encoder_flops(config: ModernBertConfig, lengths: Lengths) -> float:
    """Forward FLOPs of ModernBERT's encoder: every layer on every token; attention over the whole
    sequence in global layers, over the window's band in local ones."""
    h, layers = config.hidden_size, config.num_hidden_layers
    s = _as_array(lengths)
    global_layers = config.layer_types.count(GLOBAL)
    projections = 4 * h * h + 3 * h * config.intermediate_size  # QKV, output; GeGLU in (2I) and out
    pairs = global_layers * int((s * s).sum()) + (layers - global_layers) * int(
        band_pairs(s, config.window_radius).sum()
    )
    return 2.0 * (layers * projections * int(s.sum()) + 2 * h * pairs)  # scores and weighted sum per pair


def pretraining_flops(config: BertConfig, lengths: Lengths, masked: Lengths, training: bool = True) -> float:
    """BertForPreTraining (or ModernBertForMaskedLM) on sequences of `lengths` tokens with `masked`
    masked tokens each (one number for all, or one per sequence): a training step (forward +
    backward) or the forward."""
    lengths = _as_array(lengths)
    masked = _per_sequence(masked, len(lengths))
    h, v = config.hidden_size, config.vocab_size
    if isinstance(config, ModernBertConfig):  # prediction head and vocabulary on the masked tokens
        forward = encoder_flops(config, lengths) + 2.0 * int(masked.sum()) * (h * h + h * v)
        return (3 if training else 1) * forward
    encoder = encoder_flops(config, lengths, masked + 1)  # + [CLS] for the pooler
    heads = int(masked.sum()) * (h * h + h * v) + len(masked) * (h * h + 2 * h)
    return (3 if training else 1) * (encoder + 2.0 * heads)


def question_answering_flops(config: BertConfig, lengths: Lengths, training: bool = True) -> float:
    """BertForQuestionAnswering (a start and an end logit per token): a training step or the forward."""
    tokens = int(_as_array(lengths).sum())
    head = config.hidden_size**2 if isinstance(config, ModernBertConfig) else 0  # ModernBERT's dense
    forward = encoder_flops(config, lengths) + 2.0 * tokens * (head + 2 * config.hidden_size)
    return (3 if training else 1) * forward


def classification_flops(
    config: BertConfig, lengths: Lengths, num_labels: int, training: bool = True
) -> float:
    """BertForSequenceClassification (or BertForMultipleChoice, num_labels=1 per candidate
    sequence): the last layer for [CLS] only, pooler, classifier; a training step or the forward."""
    lengths = _as_array(lengths)
    h = config.hidden_size
    # BERT: the pooler on [CLS]; ModernBERT: the prediction head's dense on the pooled sequence.
    forward = encoder_flops(config, lengths, 1) + 2.0 * len(lengths) * (h * h + h * num_labels)
    return (3 if training else 1) * forward


@dataclass
class MatmulPeak:
    tflops: float  # the best rate measured
    shape: tuple[int, int, int]  # (m, k, n) of the matmul that reached it
    precision: str
    rates: dict  # "m x k x n" -> TFLOP/s, every shape measured

    def to_dict(self) -> dict:
        return {
            "tflops": self.tflops,
            "shape": list(self.shape),
            "precision": self.precision,
            "rates": self.rates,
        }


def matmul_shapes(config: BertConfig, tokens: int) -> list[tuple[int, int, int]]:
    """(m, k, n) of the encoder's matmuls for `tokens` tokens per step: the attention output
    projection (H x H), the feed-forward in (H x I) and out (I x H), at the step's token count and
    at twice and four times it ("several sizes": a larger m is often faster, so the peak is not
    flattered by a step too small to fill the machine)."""
    h, i = config.hidden_size, config.intermediate_size
    ffn_in = 2 * i if isinstance(config, ModernBertConfig) else i  # GeGLU's value and gate in one
    return [(m, k, n) for m in (tokens, 2 * tokens, 4 * tokens) for k, n in ((h, h), (h, ffn_in), (i, h))]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(shape: tuple[int, int, int], device: torch.device, dtype: torch.dtype, min_seconds: float,
                repeats: int = 3) -> float:  # fmt: skip
    """TFLOP/s of `a @ b` at (m, k, n): after one untimed call, the fastest of `repeats` groups of
    calls, each group long enough (`min_seconds`) for the timer and the device's queue."""
    m, k, n = shape
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=generator).to(device=device, dtype=dtype)
    _synchronize(device)
    started = time.perf_counter()
    torch.mm(a, b)
    _synchronize(device)
    calls = max(1, int(min_seconds / max(time.perf_counter() - started, 1e-6)))
    best = float("inf")
    for _ in range(repeats):
        _synchronize(device)
        started = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b)
        _synchronize(device)
        best = min(best, (time.perf_counter() - started) / calls)
    return 2 * m * k * n / best / 1e12


def matmul_peak(
    config: BertConfig,
    tokens: int,
    device: torch.device | str,
    precision: str,
    min_seconds: float | None = None,
) -> MatmulPeak:
    """The device's dense matmul rate in `precision` (fp32, or bf16/fp16 as autocast runs the
    model's matmuls; on CUDA fp32 uses TF32 if the caller allowed it, as training does): the best
    over `matmul_shapes(config, tokens)`. min_seconds per timed group: 0.01 on CUDA, 0.02 on CPU
    (the whole sweep then takes a few seconds on a 2-core CPU at BERT-base shapes)."""
    device = torch.device(device)
    dtype = AUTOCAST_DTYPES[precision] or torch.float32
    if min_seconds is None:
        min_seconds = 0.01 if device.type == "cuda" else 0.02
    rates = {shape: matmul_rate(shape, device, dtype, min_seconds) for shape in matmul_shapes(config, tokens)}
    best = max(rates, key=rates.get)
    return MatmulPeak(rates[best], best, precision, {"x".join(map(str, s)): r for s, r in rates.items()})


# Dense peak TFLOP/s per GPU (bf16/fp16 tensor cores; fp32 = TF32 tensor cores), from the vendor
# data sheets (SXM parts unless named): the figure NVIDIA's and MosaicML's MFU divide by, reported
# next to ours. Matched in order against the device's name, so a longer name comes before its prefix.
DATASHEET_TFLOPS = {
    "H200": {"bf16": 989, "fp16": 989, "fp32": 494},
    "H100 PCIe": {"bf16": 756, "fp16": 756, "fp32": 378},
    "H100": {"bf16": 989, "fp16": 989, "fp32": 494},
    "A100": {"bf16": 312, "fp16": 312, "fp32": 156},
    "A10": {"bf16": 125, "fp16": 125, "fp32": 62.5},
    "L4": {"bf16": 121, "fp16": 121, "fp32": 60},
    "V100": {"bf16": 0, "fp16": 125, "fp32": 15.7},
}


def datasheet_peak(device: torch.device | str, precision: str) -> float | None:
    """The data-sheet peak TFLOP/s of a known GPU in `precision`; None on a CPU or another GPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peaks[precision] or None for gpu, peaks in DATASHEET_TFLOPS.items() if gpu in name), None)


# One peak per machine (docs/training.md#the-peak-mfu-divides-by). Where a run executes is no DVC
# param, so the peak lives outside the project: set by the user, or measured once on request and
# kept per machine in PEAK_FILE_ENV's file (default: ~/.cache/bert-dvc/device_peaks.json).
PEAK_ENV = "BERT_PEAK_TFLOPS"
PEAK_FILE_ENV = "BERT_PEAK_FILE"
MEASURE_COMMAND = "python -m bert.model.flops --measure-peak"
# The shapes a machine's peak is measured at: BERT-base's encoder matmuls at 2048, 4096 and 8192
# tokens (matmul_shapes), large enough to fill a CPU or a GPU, whatever model a run trains.
MEASURE_SHAPE = BertConfig()


@dataclass(frozen=True)
class DevicePeak:
    """The peak a training run's MFU divides by, per device, and where it comes from."""

    tflops: float
    source: str  # "user" | "datasheet" | "measured <date>" | "probe"
    description: str  # for the log: which data sheet, what was measured, or what the user set


def peak_file() -> Path:
    """The file of this machine's measured peaks: $BERT_PEAK_FILE, else ~/.cache/bert-dvc/device_peaks.json."""
    return Path(os.environ.get(PEAK_FILE_ENV) or Path.home() / ".cache" / "bert-dvc" / "device_peaks.json")


def device_name(device: torch.device | str) -> str:
    """The device as its peak depends on it: the GPU's name, or the CPU at this process's thread count."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu, {torch.get_num_threads()} threads"


def machine_key(device: torch.device | str, precision: str) -> str:
    """The measured peaks' key: host, device and precision (a home folder may be shared by a cluster's nodes)."""
    return f"{socket.gethostname()} | {device_name(device)} | {precision}"


def _user_peak() -> float | None:
    raw = os.environ.get(PEAK_ENV, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"{PEAK_ENV}={raw!r}: want the dense peak TFLOP/s of one device, a number > 0")
    return value


def _measured_peaks() -> dict:
    """The measured peaks of `peak_file()` (none when it does not exist), each entry checked."""
    path = peak_file()
    try:
        peaks = json.loads(path.read_text(encoding="utf-8"))["peaks"]
        for key, entry in peaks.items():
            if not (
                isinstance(entry["tflops"], (int, float))
                and entry["tflops"] > 0
                and isinstance(entry["measured"], str)
            ):
                raise ValueError(f"{key!r} holds no peak in TFLOP/s and date")
        return peaks
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UserError(f"{path}: not a file of measured peaks ({first_line(error)}); delete it and run "
                        f"`{MEASURE_COMMAND}`") from None  # fmt: skip


_PROBED: dict[tuple, float] = {}


def device_peak(config: BertConfig, device: torch.device | str, precision: str) -> DevicePeak:
    """The dense peak of one `device` in `precision`, first found of: the user's ($BERT_PEAK_TFLOPS),
    a known GPU's data sheet (DATASHEET_TFLOPS), this machine's measurement (`measure_peak`, kept
    in `peak_file()`), else a short probe (the best of the encoder's three matmul shapes at 2048
    tokens, about 0.1 s for a tiny model on a 2-core CPU), once per process: a probe moves with
    the machine's load, so the log says how to measure the machine once instead. A run divides its
    curve and its summary by the one peak this returns at its start."""
    user = _user_peak()
    if user is not None:
        return DevicePeak(user, "user", f"peak set by the user ({PEAK_ENV}={os.environ[PEAK_ENV].strip()})")
    sheet = datasheet_peak(device, precision)
    if sheet:
        name = torch.cuda.get_device_name(device)
        return DevicePeak(float(sheet), "datasheet", f"{name}'s data-sheet dense {precision} peak")
    where = device_name(device)
    measured = _measured_peaks().get(machine_key(device, precision))
    if measured:
        day = measured["measured"][:10]
        return DevicePeak(measured["tflops"], f"measured {day}",
                          f"{precision} matmul peak measured on {day} ({where}, {peak_file()})")  # fmt: skip
    device = torch.device(device)
    key = (where, device, precision, config.hidden_size, config.intermediate_size)
    if key not in _PROBED:  # once per process: a stage that trains twice, or a test suite, probes once
        dtype = AUTOCAST_DTYPES[precision] or torch.float32
        min_seconds = 0.002 if device.type == "cuda" else 0.005
        shapes = matmul_shapes(config, 2048)[:3]
        _PROBED[key] = max(matmul_rate(shape, device, dtype, min_seconds, repeats=2) for shape in shapes)
    return DevicePeak(_PROBED[key], "probe", f"{precision} matmul probe at this run's start ({where}; it moves "
                      f"with the machine's load: `{MEASURE_COMMAND}` measures this machine once)")  # fmt: skip


def measure_peak(device: torch.device | str, precision: str, sweeps: int = 2) -> dict:
    """This machine's dense matmul peak in `precision`, the best of `sweeps` sweeps of MEASURE_SHAPE's
    matmuls (matmul_peak), saved in `peak_file()` under `machine_key` for every later run to use.
    A few seconds on a GPU, about 15 s on a 2-core CPU; best taken on a quiet machine."""
    peak = best_peak(
        *(matmul_peak(MEASURE_SHAPE, 2048, device, precision, min_seconds=0.05) for _ in range(sweeps))
    )
    entry = {
        "tflops": peak.tflops,
        "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "shape": list(peak.shape),
        "torch": torch.__version__,
    }
    path = peak_file()
    peaks = {**_measured_peaks(), machine_key(device, precision): entry}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"peaks": dict(sorted(peaks.items()))})
    return entry


def best_peak(*peaks: MatmulPeak) -> MatmulPeak:
    """The best of sweeps taken before and after the model's timing: on a machine shared with other
    work a sweep that met a busy moment would understate the peak (and overstate MFU)."""
    return max(peaks, key=lambda peak: peak.tflops)


def mfu(flops_per_step: float, seconds_per_step: float, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: the step's model FLOP/s over the peak (None without a peak)."""
    return flops_per_step / seconds_per_step / (peak_tflops * 1e12) if peak_tflops else None


def main(argv: list[str] | None = None) -> None:
    """`python -m bert.model.flops --measure-peak`: measure this machine's peak, for the runs after it."""
    parser = argparse.ArgumentParser(prog="python -m bert.model.flops", description=main.__doc__)
    parser.add_argument("--measure-peak", action="store_true", required=True,
                        help=f"measure the dense matmul peak and keep it in ${PEAK_FILE_ENV} (default ~/.cache/bert-dvc/device_peaks.json)")  # fmt: skip
    parser.add_argument("--precision", nargs="+", choices=list(AUTOCAST_DTYPES), default=["fp32"],
                        help="the precisions the runs use (pretrain.precision, finetune.precision)")  # fmt: skip
    parser.add_argument("--threads", type=int, help="CPU threads, as the runs set them (default: torch's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    for precision in args.precision:
        entry = measure_peak(args.device, precision)
        print(f"{machine_key(args.device, precision)}: {entry['tflops']:.4g} TFLOP/s -> {peak_file()}")
        if datasheet_peak(args.device, precision):
            print(f"  (this GPU's data sheet, {datasheet_peak(args.device, precision)} TFLOP/s, stays what MFU divides by; "
                  f"{PEAK_ENV} overrides it)")  # fmt: skip


if __name__ == "__main__":
    run_main(main)
