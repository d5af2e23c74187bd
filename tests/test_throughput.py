"""The throughput figures the training loop logs (bert.training.throughput): real tokens/s, padding,
model FLOP/s, MFU against the device's peak, the share of time spent waiting for data."""

import csv
import logging
import time

import pytest
import torch

import bert.model.flops
from bert.model.flops import (
    classification_flops,
    device_peak,
    pretraining_flops,
    question_answering_flops,
    real_lengths,
)
from bert.model.network import BertForMultipleChoice, BertForSequenceClassification
from bert.pretraining.loss import pretraining_objective
from bert.squad.objective import question_answering_step_flops
from bert.tasks.objective import task_step_flops
from bert.training.loop import per_row
from bert.training.optim import build_optimizer, warmup_poly_schedule
from tests.support.loop import run_loop
from tests.support.shard_fixtures import VOCAB, tiny_model

torch.set_num_threads(1)

SEQ_LEN = 24
# Three micro-batches a step, two steps an interval: each interval sees all six batches.
LENGTHS = [[24, 5, 9, 24], [3, 24, 17, 12], [8, 8, 20, 1], [24, 24, 24, 24], [2, 6, 11, 15], [7, 19, 23, 4]]
MASKED = [1, 2, 0, 1]  # masked positions per row (slot 0 unused: a position of 0 is no mask)


class Accumulated(list):
    """Micro-batches of which `accumulation_steps` make one optimizer step, as the loaders say."""

    def __init__(self, batches: list, accumulation_steps: int):
        super().__init__(batches)
        self.accumulation_steps = accumulation_steps


def pretraining_batch(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    mask = (torch.arange(SEQ_LEN)[None] < lengths[:, None]).long()
    ids = torch.randint(5, len(VOCAB), (len(lengths), SEQ_LEN), generator=g) * mask
    positions = torch.zeros(len(lengths), 3, dtype=torch.long)
    for row, (n, length) in enumerate(zip(MASKED, lengths.tolist())):
        positions[row, : min(n, length - 1)] = torch.arange(1, min(n, length - 1) + 1)
    labels = torch.randint(5, len(VOCAB), positions.shape, generator=g) * (positions > 0)
    return dict(input_ids=ids, token_type_ids=torch.zeros_like(ids), attention_mask=mask,
                masked_lm_positions=positions, masked_lm_ids=labels,
                next_sentence_labels=torch.randint(0, 2, (len(lengths),), generator=g))  # fmt: skip


def series(live_dir, name):
    with open(live_dir / "plots/metrics/train" / f"{name}.tsv") as tsv:
        return {int(row["step"]): float(row[name]) for row in csv.DictReader(tsv, delimiter="\t")}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Four steps of three micro-batches on the six batches above (an interval of two steps is one
    pass over them), logged every two steps."""
    tmp_path = tmp_path_factory.mktemp("run")
    batches = Accumulated([pretraining_batch(lengths, seed) for seed, lengths in enumerate(LENGTHS)], 3)
    model = tiny_model(seed=0)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, 4, power=1.0)
    summary = run_loop(model, batches, pretraining_objective, optimizer, scheduler, max_steps=4, log_every=2,
                       live_dir=tmp_path / "live", metrics_file=tmp_path / "metrics.json")  # fmt: skip
    return summary, tmp_path / "live", batches, model.config


def test_figures_of_a_tiny_run_are_the_batches(tiny_run):
    summary, live, batches, config = tiny_run
    tokens = sum(sum(lengths) for lengths in LENGTHS)
    slots = len(LENGTHS) * 4 * SEQ_LEN
    sequences = len(LENGTHS) * 4
    masked = [(batch["masked_lm_positions"] != 0).sum(1) for batch in batches]
    flops = sum(pretraining_flops(config, lengths, m) for lengths, m in zip(LENGTHS, masked))
    # the run: two passes over the batches in summary["seconds"]
    assert summary["tokens_per_second"] * summary["seconds"] == pytest.approx(2 * tokens)
    assert summary["padding_waste"] == pytest.approx(1 - tokens / slots)
    assert summary["model_tflops_per_second"] * 1e12 * summary["seconds"] == pytest.approx(2 * flops)
    assert summary["mfu"] == pytest.approx(summary["model_tflops_per_second"] / summary["peak_tflops"])
    assert summary["peak_source"] == "measured" and summary["peak_tflops"] > 0  # a CPU: probed
    assert 0 <= summary["data_wait_share"] <= 1
    # each interval: one pass, timed by the same clock as its sequences/s
    tokens_per_second, per_sequence = series(live, "tokens_per_second"), series(live, "sequences_per_second")
    assert sorted(tokens_per_second) == [2, 4]
    peaks = []  # what each interval's MFU divides by: the start's probe (the summary's may be better)
    for step in (2, 4):
        assert tokens_per_second[step] / per_sequence[step] == pytest.approx(tokens / sequences)
        assert series(live, "padding_waste")[step] == pytest.approx(1 - tokens / slots)
        rate = series(live, "model_tflops_per_second")[step] * 1e12
        assert rate / tokens_per_second[step] == pytest.approx(flops / tokens)
        peaks.append(rate / 1e12 / series(live, "mfu")[step])
        assert 0 <= series(live, "data_wait_share")[step] <= 1
    assert peaks[0] == pytest.approx(peaks[1]) and peaks[0] <= summary["peak_tflops"] * (1 + 1e-6)


class SlowLoader:
    """Batches that take their time to come, as from a loader too slow for the model."""

    def __init__(self, batches, seconds):
        self.batches, self.seconds = batches, seconds

    def __iter__(self):
        for batch in self.batches:
            time.sleep(self.seconds)
            yield batch


def test_a_slow_loader_shows_as_waiting_for_data(tmp_path, tiny_run):
    model = tiny_model(seed=0)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, 4, power=1.0)
    lengths = LENGTHS[:2]
    batches = SlowLoader([pretraining_batch(row, seed) for seed, row in enumerate(lengths)], 0.3)
    summary = run_loop(model, batches, pretraining_objective, optimizer, scheduler, max_steps=4, log_every=2,
                       live_dir=tmp_path / "live")  # fmt: skip
    # At least the sleeps were spent in next(), whatever else the machine does: 4 x 0.3 s in the run,
    # 2 x 0.3 s in each interval (its length: its tokens over its tokens/s). No more than all the time.
    assert 1.2 <= summary["data_wait_share"] * summary["seconds"] <= summary["seconds"]
    interval_tokens = sum(map(sum, lengths))
    tokens_per_second = series(tmp_path / "live", "tokens_per_second")
    for step, share in series(tmp_path / "live", "data_wait_share").items():
        assert share * interval_tokens / tokens_per_second[step] >= 0.6 and share <= 1
    assert summary["data_wait_share"] > tiny_run[0]["data_wait_share"]  # batches from memory: no wait


def test_an_objective_without_flops_logs_no_mfu(tmp_path):
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    batches = [{"x": torch.randn(2, 4), "attention_mask": torch.tensor([[1, 1, 0], [1, 0, 0]])}]
    summary = run_loop(model, batches, per_row(lambda m, b: (m(b["x"]).pow(2).mean(), {})), optimizer, scheduler,
                       max_steps=2, log_every=1)  # fmt: skip
    assert summary["padding_waste"] == pytest.approx(0.5) and summary["tokens_per_second"] > 0
    assert "mfu" not in summary and "peak_tflops" not in summary


@pytest.mark.parametrize(
    "name, precision, tflops",
    [("NVIDIA H200", "bf16", 989), ("NVIDIA H100 80GB HBM3", "fp16", 989), ("NVIDIA H100 PCIe", "bf16", 756),
     ("NVIDIA A100-SXM4-80GB", "fp32", 156), ("NVIDIA A10", "bf16", 125), ("NVIDIA L4", "bf16", 121),
     ("Tesla V100-SXM2-16GB", "fp16", 125)],
)  # fmt: skip
def test_known_gpus_use_their_data_sheet(monkeypatch, name, precision, tflops):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda *a, **k: pytest.fail("probed a known GPU"))
    peak = device_peak(tiny_model().config, torch.device("cuda", 0), precision)
    assert (peak.tflops, peak.source) == (tflops, "datasheet") and name in peak.description


@pytest.mark.parametrize(
    "name, precision", [("NVIDIA RTX 6000 Ada Generation", "bf16"), ("Tesla V100", "bf16")]
)
def test_other_gpus_are_measured(monkeypatch, name, precision):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(bert.model.flops, "_MEASURED", {})  # as in a fresh process
    shapes = []
    monkeypatch.setattr(
        bert.model.flops, "matmul_rate", lambda shape, *a, **k: shapes.append(shape) or 50.0 + len(shapes)
    )
    peak = device_peak(tiny_model().config, torch.device("cuda", 0), precision)
    assert (peak.tflops, peak.source) == (53.0, "measured") and len(shapes) == 3


def test_a_probe_again_keeps_the_better_peak(monkeypatch):
    """A probe that met a busy moment understates the peak: the run's summary probes again and
    keeps the better, so its MFU cannot read above 1 from a bad start."""
    monkeypatch.setattr(bert.model.flops, "_MEASURED", {})
    rates = iter([0.2e12, 0.1e12, 0.3e12, 1e12, 2e12, 1.5e12, 0.1e12, 0.1e12, 0.1e12])
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda *a, **k: next(rates) / 1e12)
    config = tiny_model().config
    assert device_peak(config, "cpu", "fp32").tflops == 0.3  # busy at the start
    assert device_peak(config, "cpu", "fp32").tflops == 0.3  # cached: probed once
    assert device_peak(config, "cpu", "fp32", again=True).tflops == 2.0  # quiet at the end
    assert device_peak(config, "cpu", "fp32", again=True).tflops == 2.0  # busy again: the better kept


def test_the_log_says_where_the_peak_comes_from(tmp_path, caplog):
    model = tiny_model(seed=0)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, 1, power=1.0)
    with caplog.at_level(logging.INFO, logger="bert.training.throughput"):
        run_loop(model, [pretraining_batch(LENGTHS[0], 0)], pretraining_objective, optimizer, scheduler,
                 max_steps=1, precision="bf16")  # fmt: skip
    assert (
        f"MFU against the measured bf16 matmul peak (cpu, {torch.get_num_threads()} threads)" in caplog.text
    )


def test_fine_tuning_objectives_count_real_tokens():
    config = tiny_model().config
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert question_answering_step_flops(tiny_model(), {"attention_mask": mask}) == question_answering_flops(
        config, [3, 2]
    )
    classifier = BertForSequenceClassification(config, num_labels=3)
    assert task_step_flops(classifier, {"attention_mask": mask}) == classification_flops(config, [3, 2], 3)
    choices = torch.tensor([[[1, 1, 0, 0], [1, 1, 1, 1]], [[1, 0, 0, 0], [1, 1, 1, 0]]])  # [N, C, S]
    assert list(real_lengths(choices)) == [2, 4, 1, 3]
    chooser = BertForMultipleChoice(config)
    assert task_step_flops(chooser, {"attention_mask": choices}) == classification_flops(
        config, [2, 4, 1, 3], 1
    )


def test_the_overhead_benchmark_runs(tmp_path):
    """bench/throughput_meter.py, smallest: both variants train, the meter's figures come out, and
    the loop is left with the real meter."""
    import bert.training.loop
    from bench.throughput_meter import main

    results = main(["--size", "tiny", "--batch", "2", "--seq-len", "16", "--steps", "1", "--rounds", "2",
                    "--distinct", "2", "--json", str(tmp_path / "out.json")])  # fmt: skip
    assert len(results["ratios"]) == 2 and results["meter_ms_per_step"] > 0
    assert results["last_figures"]["tokens_per_second"] > 0 and results["peak"]["source"] == "measured"
    assert bert.training.loop.ThroughputMeter is bert.training.throughput.ThroughputMeter
