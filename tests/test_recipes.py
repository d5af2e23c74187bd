"""params.yaml is the one source of every training setting: each training stage's TrainConfig,
optimizer and schedule are checked field by field against the params (set to values no library
default has), and prediction takes its precision from finetune.precision for SQuAD and tasks."""

import dataclasses
import inspect
from pathlib import Path

import pytest
import torch

import bert.finetune
from bert.checkpoints import run_signature
from bert.distributed import Distributed
from bert.finetune import steps_for_epochs
from bert.modeling import BertForQuestionAnswering
from bert.optim import Lamb
from bert.tasks.data import task_named
from bert.tasks.model import load_task_model
from bert.training import TrainConfig
from stages import finetune_squad, finetune_task, predict_squad, predict_task, pretrain
from stages.params import Finetune, Recipe, load_params
from tests.squad.test_stages import make_project as squad_project
from tests.support.stage_workspace import make_workspace, set_params
from tests.tasks.test_stages import make_project as task_project
from tests.tasks.test_stages import run as run_stage

ALONE = Distributed(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
# Values no default in bert/ has, so a setting taken from a default instead of params.yaml shows.
RUN = {"precision": "bf16", "compile": True, "log_every": 3, "save_every": 9, "keep_last": 5, "resume": False,
       "max_nonfinite_steps": 7}  # fmt: skip
RECIPE = {"optimizer": "lamb", "epochs": 2, "global_batch_size": 4, "micro_batch_size": 2, "learning_rate": 3e-4,
          "warmup_proportion": 0.25, "decay_power": 2.0, "weight_decay": 0.02, "grad_clip": 0.5, "seed": 7}  # fmt: skip


def capture_training(monkeypatch) -> list:
    calls = []

    def train(model, batches, objective, optimizer, scheduler, config):
        calls.append((batches, optimizer, scheduler, config))
        return {}

    monkeypatch.setattr(bert.finetune, "train", train)
    monkeypatch.setattr(pretrain, "train", train)
    return calls


def test_finetune_takes_every_recipe_and_run_setting_as_a_required_keyword():
    """The library has no defaults for what params.yaml sets: the schema's fields are exactly the
    keywords of bert.finetune.finetune that the stages fill from it."""
    keywords = inspect.signature(bert.finetune.finetune).parameters.values()
    required = {p.name for p in keywords if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    from_params = {f.name for f in dataclasses.fields(Recipe)} | {
        f.name for f in dataclasses.fields(Finetune)
    }
    from_stage = {
        "rank",
        "world_size",
        "checkpoint_dir",
        "live_dir",
        "metrics_file",
        "run_description",
        "execution",
    }
    assert required == (from_params - {"init", "unpad", "recipe"}) | from_stage
    assert all(p.kind is not p.KEYWORD_ONLY or p.default is p.empty for p in keywords)


def check_config(config: TrainConfig, expected: dict) -> None:
    """Every TrainConfig field is named in `expected` (a new field must be wired and checked)."""
    assert set(expected) == {field.name for field in dataclasses.fields(TrainConfig)}
    for name, value in expected.items():
        assert getattr(config, name) == value, name
    assert config.run_signature == run_signature(config.run_description)


def check_fine_tuning(
    batches, optimizer, scheduler, config, recipe, checkpoints: Path, live: Path, metrics: Path
):
    steps = steps_for_epochs(batches.num_examples, recipe["epochs"], recipe["global_batch_size"])
    check_config(
        config,
        {**RUN, "max_steps": steps, "grad_clip": recipe["grad_clip"], "seed": recipe["seed"],
         "checkpoint_dir": checkpoints, "live_dir": live, "metrics_file": metrics, "execution": {"unpad": False},
         "run_signature": config.run_signature, "run_description": config.run_description, "progress": True},
    )  # fmt: skip
    assert config.run_description["recipe"]["learning_rate"] == recipe["learning_rate"]
    assert (batches.global_batch, batches.micro_batch, batches.accumulation_steps) == (4, 2, 2)
    assert batches.seed == recipe["seed"] and batches.length_binning
    assert isinstance(optimizer, Lamb)
    assert [group["weight_decay"] for group in optimizer.param_groups] == [recipe["weight_decay"], 0.0]
    warmup = round(recipe["warmup_proportion"] * steps)
    factor = scheduler.lr_lambdas[0]
    assert scheduler.base_lrs[0] == recipe["learning_rate"]
    middle = (warmup + steps) // 2
    assert factor(middle) == pytest.approx(((steps - middle) / (steps - warmup)) ** recipe["decay_power"])


def test_squad_fine_tuning_is_configured_by_params_alone(tmp_path, uncased_vocab, monkeypatch):
    root = squad_project(tmp_path / "squad", uncased_vocab, "v1.1")
    set_params(root, {**{f"finetune.{k}": v for k, v in RUN.items()}, "finetune.recipe": RECIPE,
                      "squad.recipe": {"learning_rate": 1e-3}})  # fmt: skip
    monkeypatch.chdir(root)
    calls = capture_training(monkeypatch)
    finetune_squad.run(load_params(), ALONE)
    (batches, optimizer, scheduler, config) = calls[0]
    check_fine_tuning(batches, optimizer, scheduler, config, {**RECIPE, "learning_rate": 1e-3},
                      Path("data/checkpoints/squad"), Path("dvclive/finetune_squad"),
                      Path("metrics/finetune_squad.json"))  # fmt: skip


def test_task_fine_tuning_is_configured_by_params_alone(tmp_path, uncased_vocab, monkeypatch):
    root = task_project(tmp_path / "task", uncased_vocab, ["rte"])
    set_params(root, {**{f"finetune.{k}": v for k, v in RUN.items()}, "finetune.recipe": RECIPE,
                      "tasks.rte.recipe": {"seed": 11}})  # fmt: skip
    monkeypatch.chdir(root)
    run_stage(root, "stages.download_task", "rte")
    calls = capture_training(monkeypatch)
    finetune_task.run(task_named("rte"), load_params(), ALONE)
    (batches, optimizer, scheduler, config) = calls[0]
    check_fine_tuning(batches, optimizer, scheduler, config, {**RECIPE, "seed": 11},
                      Path("data/checkpoints/tasks/rte"), Path("dvclive/finetune_task/rte"),
                      Path("metrics/finetune_task/rte.json"))  # fmt: skip


@pytest.mark.parametrize("phase", ["phase1", "phase2"])
def test_pretraining_is_configured_by_params_alone(tmp_path, monkeypatch, phase):
    root = make_workspace(tmp_path)
    shared = {"precision": "bf16", "compile": True, "log_every": 3, "save_every": 9, "keep_last": 5,
              "resume": False, "max_nonfinite_steps": 7, "grad_clip": 0.5, "decay_power": 2.0}  # fmt: skip
    set_params(root, {**{f"pretrain.{k}": v for k, v in shared.items()}, "seed": 99,
                      f"pretrain.{phase}.max_steps": 12})  # fmt: skip
    monkeypatch.chdir(root)
    params = load_params()
    config = pretrain.train_config(params, phase, {"phase": phase})
    check_config(
        config,
        {**{k: v for k, v in shared.items() if k != "decay_power"}, "max_steps": 12, "seed": 99,
         "checkpoint_dir": Path(f"data/checkpoints/{phase}"), "live_dir": Path(f"dvclive/pretrain_{phase}"),
         "metrics_file": Path(f"metrics/pretrain_{phase}.json"), "run_signature": run_signature({"phase": phase}),
         "run_description": {"phase": phase}, "progress": True,
         "execution": {"unpad": False, "use_apex": False, "data_workers": 0}},
    )  # fmt: skip


def test_prediction_runs_in_finetune_precision_for_squad_and_tasks(tmp_path, uncased_vocab, monkeypatch):
    """predict_squad once ignored finetune.precision while predict_task honoured it."""
    squad = squad_project(tmp_path / "squad", uncased_vocab, "v1.1")
    task = task_project(tmp_path / "task", uncased_vocab, ["rte"])
    asked = []
    for stage, root, model_dir in ((predict_squad, squad, "data/models/squad"),
                                   (predict_task, task, "data/models/tasks/rte")):  # fmt: skip
        set_params(root, {"finetune.precision": "bf16"})
        monkeypatch.chdir(root)
        if stage is predict_task:
            run_stage(root, "stages.download_task", "rte")
            head = load_task_model(task_named("rte"), root / "data/weights/phase2")
            head.save_pretrained(
                root / model_dir,
                root / "data/weights/phase2/vocab.txt",
                True,
                ["entailment", "not_entailment"],
            )
            monkeypatch.setattr("sys.argv", ["predict_task", "rte"])
        else:
            qa = BertForQuestionAnswering.from_pretrained(root / "data/weights/phase2")
            qa.save_pretrained(root / model_dir, vocab_file=root / "data/weights/phase2/vocab.txt")
        real = stage.predict_logits

        def predict_logits(*args, real=real, **kwargs):
            asked.append(kwargs["precision"])
            return real(*args, **kwargs)

        monkeypatch.setattr(stage, "predict_logits", predict_logits)
        stage.main()
    assert asked == ["bf16", "bf16"]
