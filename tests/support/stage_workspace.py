"""A throw-away project folder for running stages.pretrain as DVC would: params.yaml (the repo's,
adjusted), data/vocab/vocab.txt, data/examples/<phase>/*.hdf5 and data/weights/random (phase 1's
start, as init_random writes it)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.shard_fixtures import VOCAB, write_shards, write_vocab

REPO = Path(__file__).resolve().parents[2]


def repo_params() -> dict:
    """The repository's params, with every corpus and task source pointing at `params.yaml` itself:
    stages other than the downloads never read the sources, but the schema checks that they exist."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    for corpus in params["corpora"].values():
        corpus["sources"] = ["params.yaml"]
    for name, task in params["tasks"].items():
        if name != "run":
            task["sources"] = ["params.yaml"]
    return params


def write_params(root: Path, changes: dict | None = None) -> None:
    """root/params.yaml: the repository's params (see repo_params) with `changes` (see set_params)."""
    _save(root, _changed(repo_params(), changes or {}))


def set_params(root: Path, changes: dict) -> None:
    """Change root/params.yaml, as in set_params(root, {"squad.recipe.epochs": 1, "seed": 7}): each dotted
    key gets its value, and a mapping value replaces the whole section. A key that itself holds a
    dot (squad.sources' v1.1) is set through its parent: {"squad.sources": {...}}."""
    _save(root, _changed(yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8")), changes))


def _changed(params: dict, changes: dict) -> dict:
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = params
        for key in parents:
            node = node[key]  # a misspelt section fails here rather than adding a stray key
        node[last] = value
    return params


def _save(root: Path, params: dict) -> None:
    # In the order written (the repository's, then a change's): the order of pretrain.phases and tasks.run means something.
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")


def make_workspace(root: Path, nproc: int = 1, micro_batch_size: int = 8, **pretrain) -> Path:
    """Shards with masks drawn as the examples stage draws them; global batch 8 in both phases."""
    config = dict(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.json").write_text(json.dumps(config))
    phase = {
        "max_steps": 8,
        "global_batch_size": 8,
        "micro_batch_size": micro_batch_size,
        "learning_rate": 0.02,
    }
    write_params(
        root,
        {
            "model.size": "model.json",
            "examples.phase1": {"max_seq_length": 16, "max_predictions_per_seq": 3},
            "examples.phase2": {"max_seq_length": 24, "max_predictions_per_seq": 4},
            "pretrain.log_every": 1,
            "pretrain.save_every": 4,
            "pretrain.data_workers": 0,
            **{f"pretrain.{key}": value for key, value in pretrain.items()},
            **{f"pretrain.phase1.{key}": value for key, value in phase.items()},
            **{f"pretrain.phase2.{key}": value for key, value in phase.items()},
            "distributed.nproc_per_node": nproc,
        },
    )
    (root / "data/vocab").mkdir(parents=True)
    write_vocab(root / "data/vocab/vocab.txt")
    write_shards(root / "data/examples/phase1", sizes=(40, 24, 33), seq_len=16, max_pred=3, drawn_masks=True)
    write_shards(root / "data/examples/phase2", sizes=(20, 30), seq_len=24, max_pred=4, drawn_masks=True)
    write_random_start(root)
    return root


def write_random_start(root: Path) -> None:
    """root/data/weights/random as stages.init_random writes it from root's params.yaml and vocabulary."""
    from stages.init_random import write_random_weights

    params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    size = params["model"]["size"]
    if (root / size).exists():  # a config.json of the workspace, named relative to it
        size = str(root / size)
    write_random_weights(root / "data/weights/random", root / "data/vocab/vocab.txt", size, params["seed"],
                         params["vocab"]["lower_case"])  # fmt: skip


def run_stage(
    root: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m <args>` in `root` with this checkout's code, one OpenMP thread, and `env` on top."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


def copy_project(root: Path, with_results: bool = False) -> Path:
    """A new DVC project at `root`: the working tree's tracked and unignored files (.dvc/ included;
    without dvc.lock, metrics and curves, so no stage has run, unless `with_results`: then as a
    fresh clone of the repository, whose lock names outputs its empty cache never held), committed
    in a new git repository. Links are copied as links."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if not with_results and (name.startswith(("dvclive/", "metrics/")) or name == "dvc.lock"):
            continue
        if source.is_symlink() or source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name, follow_symlinks=False)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for command in (["init", "--quiet"], ["add", "-A"], ["commit", "--quiet", "-m", "project"]):
        subprocess.run([*git, *command], cwd=root, check=True, capture_output=True)  # DVCLive needs a commit
    return root
