"""bench/report.py --quick: a tiny-model smoke run that writes the JSON and the Markdown table."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def test_quick_report_on_cpu_writes_json_and_markdown(tmp_path):
    command = [sys.executable, str(REPO / "bench/report.py"), "--quick", "--device", "cpu", "--threads", "1",
               "--out-dir", str(tmp_path)]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["meta"]["torch"] == torch.__version__ and report["meta"]["precision"] == "fp32"
    rows = report["rows"]
    assert [(r["task"], r["seq_len"]) for r in rows] == [
        ("phase1", 128), ("phase2", 512), ("squad_finetune", 384), ("squad_inference", 384),
    ]  # fmt: skip
    assert all(r["model"] == "tiny" and r["batch"] == 2 and r["sequences_per_second"] > 0 for r in rows)
    for row in rows:  # MFU: model TFLOP/s over the matmul peak measured in the run, on a CPU too
        assert (
            row["mfu"] == pytest.approx(row["model_tflops_per_second"] / row["peak_tflops"])
            and row["mfu"] > 0
        )
        assert row["mfu_datasheet"] is None  # a data-sheet peak only for known GPUs
    # transformers on the same batches where the benchmarks compare: pretraining and inference
    assert [r["vs_transformers"] is not None for r in rows] == [True, True, False, True]
    table = (tmp_path / "report.md").read_text().splitlines()
    assert table[0].startswith(
        "| Model | Phase / task | Seq len | Batch | Precision | Sequences/s | Model TFLOP/s | Measured peak TFLOP/s "
        "| MFU | MFU (data sheet) | vs transformers |"
    )
    assert len(table) == 2 + len(rows)
    assert table[3].startswith("| tiny | pretraining phase 2 | 512 | 2 | fp32 |")
    assert table[-1] in result.stdout
