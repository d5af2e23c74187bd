"""The throughput figures the training loop logs (bert.training.throughput): real tokens/s, padding,
model FLOP/s, MFU against the device's peak, the share of time spent waiting for data."""

import csv
import datetime
import json
import logging
import time

import pytest
import torch

import bert.model.flops
from bert.errors import UserError
from bert.model.flops import (
    classification_flops,
    device_peak,
    pretraining_flops,
    question_answering_flops,
    real_lengths,
)
from bert.model.flops import main as flops_main
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
    assert summary["peak_source"] == "probe" and summary["peak_tflops"] > 0  # a CPU, nothing measured or set
    assert 0 <= summary["data_wait_share"] <= 1
    # each interval: one pass, timed by the same clock as its sequences/s
    tokens_per_second, per_sequence = series(live, "tokens_per_second"), series(live, "sequences_per_second")
    assert sorted(tokens_per_second) == [2, 4]
    peaks = []  # what each interval's MFU divides by: the summary's peak
    for step in (2, 4):
        assert tokens_per_second[step] / per_sequence[step] == pytest.approx(tokens / sequences)
        assert series(live, "padding_waste")[step] == pytest.approx(1 - tokens / slots)
        rate = series(live, "model_tflops_per_second")[step] * 1e12
        assert rate / tokens_per_second[step] == pytest.approx(flops / tokens)
        peaks.append(rate / 1e12 / series(live, "mfu")[step])
        assert 0 <= series(live, "data_wait_share")[step] <= 1
    assert peaks == pytest.approx([summary["peak_tflops"]] * 2)


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
    monkeypatch.setattr(bert.model.flops, "_PROBED", {})  # as in a fresh process
    shapes = []
    monkeypatch.setattr(
        bert.model.flops, "matmul_rate", lambda shape, *a, **k: shapes.append(shape) or 50.0 + len(shapes)
    )
    peak = device_peak(tiny_model().config, torch.device("cuda", 0), precision)
    assert (peak.tflops, peak.source) == (53.0, "probe") and len(shapes) == 3


def tiny_pretraining_run(tmp_path, steps=2):
    """A tiny pretraining run logged every step: its summary and its live folder."""
    model = tiny_model(seed=0)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, steps, power=1.0)
    batches = [pretraining_batch(LENGTHS[i % len(LENGTHS)], i) for i in range(steps)]
    summary = run_loop(model, batches, pretraining_objective, optimizer, scheduler, max_steps=steps, log_every=1,
                       live_dir=tmp_path / "live")  # fmt: skip
    return summary, tmp_path / "live"


def curve_peaks(live):
    """The peak each logged interval's MFU divided by."""
    rates, mfus = series(live, "model_tflops_per_second"), series(live, "mfu")
    return [rates[step] / mfus[step] for step in sorted(mfus)]


def test_the_curve_and_the_summary_divide_by_one_peak(tmp_path, monkeypatch):
    """A probe that met a quiet moment later must not change the summary's peak: the live MFU curve
    and the run's MFU are the same figure over different spans."""
    monkeypatch.setattr(bert.model.flops, "_PROBED", {})  # as in a fresh process
    rates = iter(range(1, 100))  # every probe faster than the one before
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda *a, **k: next(rates) / 10)
    summary, live = tiny_pretraining_run(tmp_path)
    assert (summary["peak_tflops"], summary["peak_source"]) == (0.3, "probe")  # the best of the start's 3
    assert curve_peaks(live) == pytest.approx([0.3, 0.3])
    assert summary["mfu"] == pytest.approx(summary["model_tflops_per_second"] / 0.3)


def test_a_peak_set_by_the_user_is_used_and_said(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("BERT_PEAK_TFLOPS", "2.5")
    monkeypatch.setattr(
        bert.model.flops, "matmul_rate", lambda *a, **k: pytest.fail("probed despite a user's peak")
    )
    with caplog.at_level(logging.INFO, logger="bert.training.throughput"):
        summary, live = tiny_pretraining_run(tmp_path)
    assert (summary["peak_tflops"], summary["peak_source"]) == (2.5, "user")
    assert curve_peaks(live) == pytest.approx([2.5, 2.5])
    assert (
        "MFU against the peak set by the user (BERT_PEAK_TFLOPS=2.5): 2.5 TFLOP/s per device" in caplog.text
    )


@pytest.mark.parametrize("value", ["fast", "0", "-3", "nan"])
def test_a_bad_user_peak_is_one_line(monkeypatch, value):
    monkeypatch.setenv("BERT_PEAK_TFLOPS", value)
    with pytest.raises(
        UserError, match=f"BERT_PEAK_TFLOPS='{value}': want the dense peak TFLOP/s of one device"
    ):
        device_peak(tiny_model().config, "cpu", "fp32")


@pytest.mark.parametrize(
    "text", ["{", "[]", '{"peaks": {"host | cpu, 1 threads | fp32": {"tflops": "fast"}}}']
)
def test_a_damaged_file_of_measured_peaks_is_one_line(tmp_path, monkeypatch, text):
    (tmp_path / "peaks.json").write_text(text)
    monkeypatch.setenv("BERT_PEAK_FILE", str(tmp_path / "peaks.json"))
    with pytest.raises(UserError, match=r"peaks.json: not a file of measured peaks \(.+\); delete it and run "
                                        r"`python -m bert.model.flops --measure-peak`$"):  # fmt: skip
        device_peak(tiny_model().config, "cpu", "fp32")


def test_a_measured_peak_is_kept_per_machine_and_reused(tmp_path, monkeypatch, caplog, capsys):
    """`python -m bert.model.flops --measure-peak` writes the machine's peak once; later runs (other
    processes: nothing probed in this one counts) divide by it and say when it was measured."""
    monkeypatch.setenv("BERT_PEAK_FILE", str(tmp_path / "cache" / "peaks.json"))
    monkeypatch.setattr(bert.model.flops, "_PROBED", {})
    shapes = []
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda shape, *a, **k: shapes.append(shape) or 0.8)
    flops_main(["--measure-peak", "--precision", "fp32", "bf16", "--threads", str(torch.get_num_threads())])
    assert {(k, n) for _, k, n in shapes} == {
        (768, 768),
        (768, 3072),
        (3072, 768),
    }  # BERT-base's shapes, whatever model trains
    assert "0.8 TFLOP/s ->" in capsys.readouterr().out
    saved = json.loads((tmp_path / "cache" / "peaks.json").read_text())["peaks"]
    assert sorted(key.rsplit(" | ", 1)[1] for key in saved) == ["bf16", "fp32"]
    monkeypatch.setattr(
        bert.model.flops, "matmul_rate", lambda *a, **k: pytest.fail("probed a measured machine")
    )
    with caplog.at_level(logging.INFO, logger="bert.training.throughput"):
        summary, live = tiny_pretraining_run(tmp_path)
    today = datetime.date.today().isoformat()
    assert (summary["peak_tflops"], summary["peak_source"]) == (0.8, f"measured {today}")
    assert curve_peaks(live) == pytest.approx([0.8, 0.8])
    assert f"MFU against the fp32 matmul peak measured on {today}" in caplog.text
    # another thread count is another machine as far as the peak goes: probed, and the log says how to measure
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda *a, **k: 0.1)
    torch.set_num_threads(torch.get_num_threads() + 1)
    try:
        assert device_peak(tiny_model().config, "cpu", "fp32").source == "probe"
    finally:
        torch.set_num_threads(torch.get_num_threads() - 1)


def test_the_log_says_where_the_peak_comes_from(tmp_path, caplog):
    model = tiny_model(seed=0)
    optimizer = build_optimizer(model, "adamw", 1e-3, 0.01)
    scheduler = warmup_poly_schedule(optimizer, 1, 1, power=1.0)
    with caplog.at_level(logging.INFO, logger="bert.training.throughput"):
        run_loop(model, [pretraining_batch(LENGTHS[0], 0)], pretraining_objective, optimizer, scheduler,
                 max_steps=1, precision="bf16")  # fmt: skip
    assert (
        f"MFU against the bf16 matmul probe at this run's start (cpu, {torch.get_num_threads()} threads; it moves "
        "with the machine's load: `python -m bert.model.flops --measure-peak` measures this machine once)"
        in caplog.text
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
    assert results["last_figures"]["tokens_per_second"] > 0 and results["peak"]["source"] == "probe"
    assert bert.training.loop.ThroughputMeter is bert.training.throughput.ThroughputMeter


def test_the_pretraining_stage_records_the_peak_it_used(tmp_path, monkeypatch):
    """Through stages.pretrain: this machine's measured peak is what the MFU curve and
    metrics/pretrain_phase1.json divide by, and the metrics say where it came from."""
    from bert.distributed.launch import setup_distributed
    from stages import pretrain as stage
    from stages.common.params import load_params
    from tests.support.stage_workspace import make_workspace, set_params

    monkeypatch.setenv("BERT_PEAK_FILE", str(tmp_path / "peaks.json"))
    monkeypatch.setattr(bert.model.flops, "matmul_rate", lambda *a, **k: 0.5)
    bert.model.flops.measure_peak("cpu", "fp32")
    monkeypatch.setattr(
        bert.model.flops, "matmul_rate", lambda *a, **k: pytest.fail("probed a measured machine")
    )
    root = make_workspace(tmp_path / "project")
    set_params(root, {"pretrain.log_every": 2, "pretrain.phase1.max_steps": 4, "pretrain.precision": "fp32"})
    monkeypatch.chdir(root)
    stage.pretrain(load_params(), "phase1", setup_distributed("gloo", 5))
    metrics = json.loads((root / "metrics/pretrain_phase1.json").read_text())
    assert (metrics["peak_tflops"], metrics["peak_source"]) == (0.5, f"measured {datetime.date.today()}")
    assert metrics["mfu"] == pytest.approx(metrics["model_tflops_per_second"] / 0.5)
    assert curve_peaks(root / "dvclive/pretrain_phase1") == pytest.approx([0.5, 0.5])
