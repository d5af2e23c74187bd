"""How far a run resumed on another number of ranks ends from the uninterrupted one, with and
without dropout (docs/operations.md, "Resuming on another number of GPUs").

    PYTHONPATH=. python bench/world_size_resume.py [--steps 40] [--dropout 0.1 0.0]

For each dropout: the pretraining stage on 2 ranks (global batch 8 = 2 x 4) runs `steps` steps in
a throw-away workspace (the tests' tiny model and shards: tests/support/stage_workspace.py); a copy then
resumes its half-way checkpoint on 1 rank (2 accumulation steps). Printed: the largest and the
relative difference of the final weights, and both runs' final training loss.
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from bert.training.checkpoints import list_checkpoints, load_checkpoint
from tests.support.stage_workspace import make_workspace, run_stage, set_params

CHECKPOINTS = "data/checkpoints/phase1"


def final(root: Path) -> tuple[dict, float]:
    weights = load_checkpoint(list_checkpoints(root / CHECKPOINTS)[-1])["model"]
    return weights, json.loads((root / "metrics/pretrain_phase1.json").read_text())["loss"]


def run(root: Path) -> None:
    result = run_stage(root, "stages.pretrain", "phase1")
    if result.returncode:
        sys.exit(result.stderr[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.1, 0.0])
    args = parser.parse_args()
    print("| dropout | max abs diff | norm of diff / norm | loss uninterrupted | loss resumed 2 -> 1 ranks |")
    print("| --- | --- | --- | --- | --- |")
    for dropout in args.dropout:
        with tempfile.TemporaryDirectory() as folder:
            straight = make_workspace(Path(folder) / "straight", nproc=2, micro_batch_size=4)
            model = json.loads((straight / "model.json").read_text())
            model.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
            (straight / "model.json").write_text(json.dumps(model))
            set_params(
                straight, {"pretrain.phase1.max_steps": args.steps, "pretrain.save_every": args.steps // 2}
            )
            run(straight)
            resumed = Path(folder) / "resumed"
            shutil.copytree(straight, resumed)
            list_checkpoints(resumed / CHECKPOINTS)[-1].unlink()  # as if stopped half-way
            shutil.rmtree(resumed / "data/weights/phase1")
            set_params(resumed, {"distributed.nproc_per_node": 1})
            run(resumed)
            (a, loss_a), (b, loss_b) = final(straight), final(resumed)
            diff = max((a[k] - b[k]).abs().max().item() for k in a)
            norm = (
                torch.cat([(a[k] - b[k]).flatten() for k in a]).norm()
                / torch.cat([a[k].flatten() for k in a]).norm()
            )
            print(f"| {dropout} | {diff:.2g} | {norm.item():.2g} | {loss_a:.4f} | {loss_b:.4f} |")


if __name__ == "__main__":
    main()
