"""What `make demo` prints at the end: the metrics, and where the artifacts and plots are."""

import subprocess
import sys
from pathlib import Path

ARTIFACTS = [
    ("data/documents/", "extracted documents (Parquet: corpus, doc_id, title, text)"),
    ("data/shards/", "sentence shards (Parquet: doc_id, sentences)"),
    ("data/vocab/vocab.txt", "WordPiece vocabulary"),
    ("data/examples/", "pretraining examples (HDF5, NVIDIA layout) + manifest.json"),
    ("data/models/phase1/", "phase-1 model (Hugging Face format)"),
    ("data/models/hf/", "final pretrained model, Hugging Face format"),
    ("data/models/squad/", "SQuAD fine-tuned model, Hugging Face format"),
    ("data/predictions/", "predictions.json, nbest_predictions.json (null_odds.json for v2.0)"),
    ("metrics/", "DVC metrics (dvc metrics show / diff)"),
    ("dvclive/", "step-wise training curves (dvc plots show)"),
]


def main() -> None:
    dvc = str(Path(sys.executable).with_name("dvc"))
    print("\n== dvc metrics show ==")
    subprocess.run([dvc, "metrics", "show"], check=False)
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
