"""How fast a training run goes, per log interval and over the run: what `bert.training.loop.train`
logs next to the loss (DVCLive `train/*`, the stage's metrics JSON).

    tokens_per_second        real (non-padding) tokens of the interval over its wall time, all ranks
    padding_waste            padding slots / all token slots of the batches the loader gave
    model_tflops_per_second  model FLOPs of the interval's training steps on their real tokens
                             (the objective's `flops`, bert.model.flops) over its wall time, all ranks
    mfu                      model FLOP/s over the peak of all ranks' devices (bert.model.flops.device_peak:
                             the user's, a known GPU's data sheet, the machine's measured one, else a
                             probe at the start), one peak for the curve and the summary
    data_wait_share          time in the loader's next() over the wall time (mean over ranks)

Everything is counted on the host from the batches as the loader hands them over, before they go
to the device (the loop counts its loss terms' items there too): no device work and no sync per
step. The sums are all-reduced once per log interval, when the loop reduces its other figures.
Padding is counted in the loader's batches (cut to their longest sequence), so it is the share
of the padded path's token slots that held no token; the FLOPs count only real tokens, so work
spent on padding earns no credit and shows as a lower MFU.
"""

import logging
import time
from collections.abc import Callable

import torch
from torch import nn

from bert.model.config import BertConfig
from bert.model.flops import DevicePeak, device_peak, real_lengths
from bert.training.collectives import all_reduce_sum

log = logging.getLogger(__name__)

# The run's sums kept in the loop's totals (and so in its checkpoints): a resumed run's metrics
# cover the whole run.
RUN_SUMS = ("tokens", "slots", "flops", "waited")


class ThroughputMeter:
    """Counts a run's micro-batches as the loop takes them (`take`) and turns the counts into the
    figures above at each log interval (`interval`) and for the run (`summary`).

    model: the unwrapped model (its `config` is the model FLOPs' shape); flops(model, batch): the
    model FLOPs of a training step on the micro-batch's real tokens, None when the objective has
    no count (then no FLOP/s, MFU or peak); run_sums: the run's sums of RUN_SUMS so far, which
    the meter adds to (the loop's totals, checkpointed)."""

    def __init__(
        self,
        model: nn.Module,
        flops: Callable[[nn.Module, dict], float] | None,
        device: torch.device,
        precision: str,
        run_sums: dict,
        announce: bool,
    ):
        self.model, self.device, self.precision = model, device, precision
        config = getattr(model, "config", None)
        self.flops = flops if isinstance(config, BertConfig) else None
        self.run = run_sums
        self.peak: DevicePeak | None = None
        self.peak_tflops = 0.0  # every rank's device together
        if self.flops is not None:
            self.peak = device_peak(config, device, precision)
            self.peak_tflops = self._sum_over_ranks([self.peak.tflops])[0]
            if announce:
                log.info(
                    "MFU against the %s: %.4g TFLOP/s per device", self.peak.description, self.peak.tflops
                )
        self._reset()

    def _reset(self) -> None:
        self.tokens = self.slots = self.step_flops = self.waited = 0.0
        self.counted = False  # whether the batches had an attention mask

    def take(self, data, count: int) -> list[dict]:
        """`count` micro-batches from `data` (next()), timed and counted."""
        started = time.perf_counter()
        batches = [next(data) for _ in range(count)]
        self.waited += time.perf_counter() - started
        for batch in batches:
            mask = batch.get("attention_mask")
            if (
                not torch.is_tensor(mask) or mask.device.type != "cpu"
            ):  # counting it would wait for the device
                continue
            lengths = real_lengths(mask)
            self.counted = True
            self.tokens += float(lengths.sum())
            self.slots += float(mask.numel())
            if self.flops is not None:
                self.step_flops += self.flops(self.model, batch)
        return batches

    def interval(self, seconds: float, world_size: int) -> dict:
        """The figures of the interval since the last call, `seconds` long, over all ranks (one
        small all-reduce, on every rank); adds them to the run's sums."""
        counted = self.counted
        tokens, slots, flops, waited = self._sum_over_ranks(
            [self.tokens, self.slots, self.step_flops, self.waited]
        )
        self._reset()
        for name, value in zip(RUN_SUMS, (tokens, slots, flops, waited)):
            self.run[name] += value
        return self._figures(tokens, slots, flops, waited, seconds, world_size, counted)

    def summary(self, seconds: float, world_size: int) -> dict:
        """The figures over the whole run (`seconds`: its training time), and the peak the curve
        divided by, whence it came (`peak_source`: user, datasheet, measured <date> or probe)."""
        run = self.run
        figures = self._figures(
            run["tokens"], run["slots"], run["flops"], run["waited"], seconds, world_size, run["slots"] > 0
        )
        if self.peak is not None:
            figures["peak_tflops"] = self.peak.tflops
            figures["peak_source"] = self.peak.source
        return figures

    def _figures(self, tokens, slots, flops, waited, seconds, world_size, counted) -> dict:
        figures = {"data_wait_share": waited / (seconds * world_size) if seconds > 0 else 0.0}
        if counted:
            figures["tokens_per_second"] = tokens / seconds if seconds > 0 else 0.0
            figures["padding_waste"] = 1.0 - tokens / slots if slots else 0.0
        if self.flops is not None and counted:
            rate = flops / seconds if seconds > 0 else 0.0
            figures["model_tflops_per_second"] = rate / 1e12
            figures["mfu"] = rate / (self.peak_tflops * 1e12)
        return figures

    def _sum_over_ranks(self, values: list[float]) -> list[float]:
        """`values` summed over the ranks: no tensor and no collective when running alone."""
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return list(values)
        device = self.device if torch.distributed.get_backend() == "nccl" else torch.device("cpu")
        return all_reduce_sum(torch.tensor(values, dtype=torch.float64, device=device)).tolist()
