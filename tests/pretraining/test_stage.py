"""The stages as DVC runs them: pretrain phase1 -> phase2, in a throw-away project."""

import json
from pathlib import Path

import pytest
import torch

from bert.distributed.launch import Distributed
from bert.training.checkpoints import (
    file_sha256,
    in_todays_form,
    list_checkpoints,
    load_checkpoint,
    run_signature,
)
from bert.training.run import TrainingRun
from stages import pretrain
from stages.common.params import load_params
from tests.support.stage_workspace import make_workspace, run_stage, set_params


@pytest.mark.slow
def test_phase1_then_phase2(tmp_path):
    root = make_workspace(tmp_path)
    set_params(root, {"pretrain.phase2.init_optimizer_from_phase1": True})
    # The ranks' logs inside the model folder: refused before any work (the run exited 0, and
    # publishing the model wiped the logs it had announced); the run below, without it, works.
    refused = run_stage(root, "stages.pretrain", "phase1", env={"BERT_LOG_DIR": "data/models"})
    assert refused.returncode == 1 and refused.stderr.startswith(
        "error: BERT_LOG_DIR=data/models: the logs would go to data/models/phase1 (inside data/models), "
        "among the pipeline's outputs"
    ), refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert not (root / "data/weights/phase1").exists() and not (root / "data/checkpoints").exists()
    for args in (["stages.pretrain", "phase1"], ["stages.pretrain", "phase2"]):
        if args[-1] == "phase2":  # a param, so it beats run_stage's OMP_NUM_THREADS=1
            set_params(root, {"distributed.threads_per_rank": 2})
        result = run_stage(root, *args)
        assert result.returncode == 0, result.stderr[-3000:]
        assert "launching" not in result.stderr  # one process: no torchrun
    for phase, threads in (("phase1", 1), ("phase2", 2)):
        metrics = json.loads((root / f"metrics/pretrain_{phase}.json").read_text())
        assert metrics["steps"] == 8 and metrics["skipped_steps"] == 0
        assert metrics["cpu_threads"] == threads  # run_stage's OMP_NUM_THREADS=1, then threads_per_rank: 2
        assert {
            "loss",
            "mlm_loss",
            "nsp_loss",
            "mlm_accuracy",
            "nsp_accuracy",
            "first_loss",
            "sequences_per_second",
            "seconds",
        } <= set(metrics)
        assert (root / f"dvclive/pretrain_{phase}/plots/metrics/train/loss.tsv").is_file()
        assert sorted(p.name for p in (root / f"data/weights/{phase}").iterdir()) == [
            "config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt",
        ]  # fmt: skip
    hf = root / "data/weights/phase2"
    assert json.loads((hf / "tokenizer_config.json").read_text())["do_lower_case"] is True
    transformers = pytest.importorskip("transformers")
    theirs = transformers.BertForPreTraining.from_pretrained(hf).eval()
    tokenizer = transformers.BertTokenizer.from_pretrained(hf)
    assert tokenizer.convert_tokens_to_ids(["[MASK]", "w3"]) == [4, 8]
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor([[2, 8, 4, 3, 9, 3]]))
    assert torch.isfinite(out.prediction_logits).all()

    # a second run finds its final checkpoint and trains no further
    result = run_stage(root, "stages.pretrain", "phase1")
    assert result.returncode == 0 and "resumed from step 8" in result.stderr


def test_bad_phase_is_one_clear_line(tmp_path):
    root = make_workspace(tmp_path)
    result = run_stage(root, "stages.pretrain", "phase3")
    assert result.returncode == 1
    assert (
        result.stderr.strip().splitlines()[-1]
        == "error: usage: python -m stages.pretrain phase1|phase2 [--join NODE_RANK]"
    )
    set_params(root, {"pretrain.phases": {"phase1": "random"}, "finetune.init": "phase1"})
    result = run_stage(root, "stages.pretrain", "phase2")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1] == (
        "error: params.yaml: pretrain.phases runs phase1, not phase2; run one of those, or add phase2 to "
        "pretrain.phases"
    )


def test_a_global_batch_that_does_not_split_is_one_line_naming_the_params(tmp_path):
    root = make_workspace(tmp_path, micro_batch_size=3)  # global batch 8
    result = run_stage(root, "stages.pretrain", "phase1")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: params.yaml: pretrain.phase1.global_batch_size 8 is not a multiple of pretrain.phase1.micro_batch_size "
        "3 x world size 1 (distributed.nproc_per_node x nnodes); change one of them so that it divides exactly"
    )


def test_a_wsd_phase_extended_goes_on_from_its_pre_decay_checkpoint(tmp_path):
    """The stage, as `dvc exp run -S pretrain.phase1.max_steps=12` runs it after an 8-step
    warmup-stable-decay run: the steps after the old decay are not continued, the pre-decay
    checkpoint (step 6, kept past keep_last) is, and the curve has each step once."""
    root = make_workspace(tmp_path, keep_last=1)
    set_params(root, {"pretrain.phase1.schedule": "wsd", "pretrain.phase1.decay_share": 0.25})
    first = run_stage(root, "stages.pretrain", "phase1")
    assert first.returncode == 0, first.stderr[-3000:]
    checkpoints = root / "data/checkpoints/phase1"
    assert sorted(p.name for p in checkpoints.glob("step-*.pt")) == ["step-00000006.pt", "step-00000008.pt"]
    set_params(root, {"pretrain.phase1.max_steps": 12})
    extended = run_stage(root, "stages.pretrain", "phase1")
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "going on from the pre-decay checkpoint" in extended.stderr
    assert "resumed from step 6 " in extended.stderr
    assert json.loads((root / "metrics/pretrain_phase1.json").read_text())["steps"] == 12
    curve = (root / "dvclive/pretrain_phase1/plots/metrics/train/loss.tsv").read_text().splitlines()
    assert [int(row.split("\t")[curve[0].split("\t").index("step")]) for row in curve[1:]] == list(
        range(1, 13)
    )


def description_before(params, phase: str, shards: list) -> dict:
    """What a pretraining checkpoint's description was before runs were built by bert.training.run
    (stages/pretrain.py's `_described` then, frozen here; a random start: "init" None): the
    recipe's fields flat beside the data, some named only when not their one value of old."""
    recipe = params.recipe(phase)
    described = {
        "phase": phase, "model": params.model.size, "optimizer": recipe.optimizer,
        "learning_rate": recipe.learning_rate, "warmup_proportion": recipe.warmup_proportion,
        "weight_decay": recipe.weight_decay, "grad_clip": recipe.grad_clip, "global_batch": recipe.global_batch_size,
        "seed": recipe.seed, "masking": getattr(params.examples, phase).masking,
        "shards": [(p.name, p.stat().st_size) for p in shards],
        "manifest": file_sha256(Path(f"data/examples/{phase}/manifest.json")), "init": None,
    }  # fmt: skip
    if not getattr(params.examples, phase).next_sentence:
        described["next_sentence"] = False
    if params.pretrain.length_binning:
        described["length_binning"] = True
    if recipe.decay_power != 0.5:
        described["decay_power"] = recipe.decay_power
    if recipe.schedule != "poly":
        described["schedule"] = {"kind": recipe.schedule, "decay_share": recipe.decay_share,
                                 "decay_shape": recipe.decay_shape}  # fmt: skip
    return described


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"pretrain.length_binning": True, "pretrain.decay_power": 1.0, "examples.next_sentence": False},
        {
            "pretrain.phase1.schedule": "wsd",
            "pretrain.phase1.decay_share": 0.25,
            "examples.masking": "dynamic",
        },
    ],
    ids=["defaults", "binned-linear-mlm-only", "wsd-dynamic"],
)
def test_a_checkpoint_described_as_before_is_the_same_run(tmp_path, monkeypatch, changes):
    """The description every value of the old form maps to, read in today's form, is the one the
    run the stage builds now describes itself by: the same signature."""
    root = make_workspace(tmp_path)
    set_params(root, changes)
    monkeypatch.chdir(root)
    runs = []
    monkeypatch.setattr(TrainingRun, "train", lambda run: runs.append(run))
    params = load_params()
    pretrain.pretrain(
        params, "phase1", Distributed(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
    )
    (run,) = runs
    old = description_before(params, "phase1", sorted(Path("data/examples/phase1").glob("*.hdf5")))
    assert in_todays_form(old) == run.record.description
    assert run_signature(in_todays_form(old)) == run.record.signature != run_signature(old)


def test_a_checkpoint_written_before_resumes(tmp_path, monkeypatch):
    """A phase 1 checkpoint as the code before wrote it (its description and signature in the old
    form) resumes under today's code, as the same run: not moved aside."""
    root = make_workspace(tmp_path)
    set_params(root, {"pretrain.phase1.max_steps": 4, "pretrain.length_binning": True})
    assert run_stage(root, "stages.pretrain", "phase1").returncode == 0
    (checkpoint,) = list_checkpoints(root / "data/checkpoints/phase1")
    state = load_checkpoint(checkpoint)
    monkeypatch.chdir(root)  # the params' paths are the workspace's
    old = description_before(load_params(), "phase1", sorted(Path("data/examples/phase1").glob("*.hdf5")))
    torch.save({**state, "description": old, "signature": run_signature(old)}, checkpoint)

    set_params(root, {"pretrain.phase1.max_steps": 8})
    resumed = run_stage(root, "stages.pretrain", "phase1")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step 4" in resumed.stderr and "moved" not in resumed.stderr
    assert not [p for p in (root / "data/checkpoints/phase1").iterdir() if p.is_dir()]
    assert json.loads((root / "metrics/pretrain_phase1.json").read_text())["steps"] == 8
