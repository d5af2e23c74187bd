"""A throw-away project folder for running stages.pretrain / stages.export_hf as DVC would:
params.yaml (the repo's, adjusted), data/vocab/vocab.txt and data/examples/<phase>/*.hdf5."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.shard_fixtures import VOCAB, write_shards, write_vocab

REPO = Path(__file__).resolve().parents[1]


def repo_params() -> dict:
    """The repository's params, with every corpus source pointing at `params.yaml` itself: stages
    other than `download` never read the sources, but the schema checks that they exist."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    for corpus in params["corpora"].values():
        corpus["sources"] = ["params.yaml"]
    return params


def write_params(root: Path, params: dict | None = None) -> None:
    (root / "params.yaml").write_text(yaml.safe_dump(params or repo_params()), encoding="utf-8")


def make_workspace(root: Path, nproc: int = 1, batch_size: int = 8, **pretrain) -> Path:
    params = repo_params()
    config = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.json").write_text(json.dumps(config))
    params["model"]["size"] = "model.json"
    params["examples"]["phase1"] = {"max_seq_length": 16, "max_predictions_per_seq": 3}
    params["examples"]["phase2"] = {"max_seq_length": 24, "max_predictions_per_seq": 4}
    params["pretrain"].update(log_every=1, save_every=4, data_workers=0, **pretrain)
    for phase in ("phase1", "phase2"):
        params["pretrain"][phase].update(max_steps=8, batch_size=batch_size, learning_rate=0.02)
    params["distributed"].update(
        nproc_per_node=nproc, rdzv_endpoint=f"localhost:{29500 + os.getpid() % 1000}"
    )
    write_params(root, params)
    (root / "data/vocab").mkdir(parents=True)
    write_vocab(root / "data/vocab/vocab.txt")
    write_shards(root / "data/examples/phase1", sizes=(40, 24, 33), seq_len=16, max_pred=3)
    write_shards(root / "data/examples/phase2", sizes=(20, 30), seq_len=24, max_pred=4)
    return root


def run_stage(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )
