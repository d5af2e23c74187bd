"""What `make demo` prints at the end: the metrics, and where the artifacts and plots are."""

import json
import subprocess
import sys
from pathlib import Path

from stages.common import layout

ARTIFACTS = [
    (f"{layout.documents('')}/", "extracted documents (Parquet: corpus, doc_id, title, text)"),
    (f"{layout.shards()}/", "sentence shards (Parquet: doc_id, sentences)"),
    (f"{layout.VOCAB}", "WordPiece vocabulary"),
    (f"{layout.examples('')}/", "pretraining examples (HDF5, NVIDIA layout) + manifest.json"),
    (f"{layout.weights('phase1')}/", "phase-1 model, Hugging Face format (finetune.init: phase1)"),
    (f"{layout.weights('phase2')}/", "phase-2 model, Hugging Face format (finetune.init: phase2)"),
    (f"{layout.model(layout.SQUAD)}/", "SQuAD fine-tuned model, Hugging Face format"),
    (f"{layout.SQUAD_PREDICTIONS}/", "predictions.json, nbest_predictions.json (null_odds.json for v2.0)"),
    (f"{layout.METRICS}/", "DVC metrics (dvc metrics show / diff)"),
    (f"{layout.LIVE}/", "step-wise training curves (dvc plots show)"),
]


def flatten(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def show_metrics(dvc: str) -> None:
    """`dvc metrics show`, one block per file (the table form is hundreds of columns wide)."""
    result = subprocess.run([dvc, "metrics", "show", "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        print(result.stderr.strip())
        return
    for revision in json.loads(result.stdout or "{}").values():
        for path, content in revision.get("data", {}).items():
            print(f"  {path}")
            for key, value in flatten(content.get("data") or {}).items():
                shown = f"{value:.4g}" if isinstance(value, float) else value
                print(f"      {key:<44} {shown}")


def main() -> None:
    dvc = str(Path(sys.executable).with_name("dvc"))
    print("\n== dvc metrics show ==")
    show_metrics(dvc)
    print("\n== artifacts ==")
    for path, what in ARTIFACTS:
        mark = " " if Path(path).exists() else "?"
        print(f" {mark} {path:<28} {what}")
    print("\nPlots: `.venv/bin/dvc plots show` writes dvc_plots/index.html; open it in a browser.")
    print(
        "Compare runs: `.venv/bin/dvc exp run --set-param finetune.init=random` then `.venv/bin/dvc metrics diff`."
    )


if __name__ == "__main__":
    main()
