"""params.yaml is the one source of every training setting: each training stage's recipe, run
settings, run record, optimizer and schedule are checked field by field against the params (set to
values no library default has), the library's types have no defaults, prediction takes its
precision from finetune.precision for SQuAD and tasks, and a wsd warm-up that reaches past the
decay's start is refused in one line, by params.yaml's check and by the library's Recipe."""

import dataclasses
import inspect
import shutil
from pathlib import Path

import pytest
import torch

import bert.training.run
from bert.distributed.launch import Distributed
from bert.errors import UserError
from bert.model.network import BertForQuestionAnswering
from bert.tasks.catalogue import task_named
from bert.tasks.model import load_task_model
from bert.training.checkpoints import described_recipe
from bert.training.loop import RunRecord
from bert.training.optim import Lamb, decay_start, learning_rate_schedule, recipe_optimizer
from bert.training.recipe import FineTuningRecipe, Recipe, RunSettings
from bert.training.run import TrainingRun, steps_for_epochs
from stages import finetune_squad, finetune_task, predict_squad, predict_task, pretrain
from stages.common.params import Finetune, Pretrain, load_params
from tests.squad.test_stages import make_project as squad_project
from tests.support.shard_fixtures import tiny_model
from tests.support.stage_workspace import make_workspace, set_params, write_params
from tests.support.stage_workspace import run_stage as stage_command
from tests.tasks.test_stages import make_project as task_project
from tests.tasks.test_stages import run as run_stage

ALONE = Distributed(rank=0, local_rank=0, world_size=1, device=torch.device("cpu"))
# Values no default in bert/ has, so a setting taken from a default instead of params.yaml shows.
RUN = {"precision": "bf16", "compile": True, "log_every": 3, "save_every": 9, "keep_last": 5, "resume": False,
       "max_nonfinite_steps": 7, "length_binning": True, "unpad": False}  # fmt: skip
RECIPE = {"optimizer": "lamb", "epochs": 2, "global_batch_size": 4, "micro_batch_size": 2, "learning_rate": 3e-4,
          "warmup_proportion": 0.25, "decay_power": 2.0, "weight_decay": 0.02, "grad_clip": 0.5, "seed": 7,
          "schedule": "poly", "decay_share": 0.2, "decay_shape": "1-sqrt"}  # fmt: skip


def capture_training(monkeypatch) -> list:
    calls = []

    def train(model, batches, objective, optimizer, scheduler, **run):
        calls.append((batches, optimizer, scheduler, run))
        return {}

    monkeypatch.setattr(bert.training.run, "train", train)  # every training stage's run trains there
    return calls


@pytest.mark.parametrize("kind", [Recipe, FineTuningRecipe, RunSettings, RunRecord, TrainingRun])
def test_the_library_types_of_a_run_have_no_defaults(kind):
    assert all(f.default is f.default_factory is dataclasses.MISSING for f in dataclasses.fields(kind))


def test_params_blocks_are_the_library_types():
    """finetune and pretrain are RunSettings (and finetune.recipe a FineTuningRecipe) as they
    stand in params.yaml, and bert.training.run.TrainingRun.build, which builds every training
    run, takes them whole, each required."""
    settings = {f.name for f in dataclasses.fields(RunSettings)}
    assert issubclass(Finetune, RunSettings) and issubclass(Pretrain, RunSettings)
    assert {f.name for f in dataclasses.fields(Finetune)} == settings | {"init", "recipe"}
    keywords = inspect.signature(TrainingRun.build).parameters.values()
    required = {p.name for p in keywords if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
    assert required == {"recipe", "settings", "record", "max_steps", "use_apex"}


def check_run(run: dict, recipe: Recipe, settings: dict, max_steps: int, folders: tuple, execution: dict):
    """What the loop was given: the recipe, params.yaml's run settings and the run's folders."""
    assert run["recipe"] == recipe and run["max_steps"] == max_steps
    assert run["settings"] == RunSettings(**settings)
    record = run["record"]
    assert (record.checkpoint_dir, record.live_dir, record.metrics_file) == folders
    assert record.execution == execution


def check_optimizer_and_schedule(optimizer, scheduler, recipe: Recipe, steps: int) -> None:
    assert isinstance(optimizer, Lamb)
    assert [group["weight_decay"] for group in optimizer.param_groups] == [recipe.weight_decay, 0.0]
    warmup = round(recipe.warmup_proportion * steps)
    factor = scheduler.lr_lambdas[0]
    assert scheduler.base_lrs[0] == recipe.learning_rate
    middle = (warmup + steps) // 2
    assert factor(middle) == pytest.approx(((steps - middle) / (steps - warmup)) ** recipe.decay_power)


def check_fine_tuning(calls: list, recipe: dict, run_name: str, folders: tuple) -> None:
    (batches, optimizer, scheduler, run) = calls[0]
    expected = FineTuningRecipe(**recipe)
    steps = steps_for_epochs(batches.num_examples, expected.epochs, expected.global_batch_size)
    check_run(run, expected, RUN, steps, tuple(map(Path, folders)), {"unpad": False})
    assert run["record"].description["recipe"]["learning_rate"] == recipe["learning_rate"]
    assert (batches.global_batch, batches.micro_batch, batches.accumulation_steps) == (4, 2, 2)
    assert batches.seed == recipe["seed"] and batches.length_binning
    check_optimizer_and_schedule(optimizer, scheduler, expected, steps)


def test_squad_fine_tuning_is_configured_by_params_alone(tmp_path, uncased_vocab, monkeypatch):
    root = squad_project(tmp_path / "squad", uncased_vocab, "v1.1")
    set_params(root, {**{f"finetune.{k}": v for k, v in RUN.items()}, "finetune.recipe": RECIPE,
                      "squad.recipe": {"learning_rate": 1e-3}})  # fmt: skip
    monkeypatch.chdir(root)
    calls = capture_training(monkeypatch)
    finetune_squad.run(load_params(), ALONE)
    check_fine_tuning(calls, {**RECIPE, "learning_rate": 1e-3}, "squad",
                      ("data/checkpoints/squad", "dvclive/finetune_squad", "metrics/finetune_squad.json"))  # fmt: skip


def test_task_fine_tuning_is_configured_by_params_alone(tmp_path, uncased_vocab, monkeypatch):
    root = task_project(tmp_path / "task", uncased_vocab, ["rte"])
    set_params(root, {**{f"finetune.{k}": v for k, v in RUN.items()}, "finetune.recipe": RECIPE,
                      "tasks.rte.recipe": {"seed": 11}})  # fmt: skip
    monkeypatch.chdir(root)
    run_stage(root, "stages.download_task", "rte")
    calls = capture_training(monkeypatch)
    finetune_task.run(task_named("rte"), load_params(), ALONE)
    check_fine_tuning(calls, {**RECIPE, "seed": 11}, "rte",
                      ("data/checkpoints/tasks/rte", "dvclive/finetune_task/rte", "metrics/finetune_task/rte.json"))  # fmt: skip


@pytest.mark.parametrize("phase", ["phase1", "phase2"])
def test_pretraining_is_configured_by_params_alone(tmp_path, monkeypatch, phase):
    root = make_workspace(tmp_path)
    shared = {**RUN, "grad_clip": 0.5, "decay_power": 2.0, "optimizer": "lamb"}
    per_phase = {"max_steps": 12, "global_batch_size": 6, "micro_batch_size": 3, "learning_rate": 3e-4,
                 "warmup_proportion": 0.25, "weight_decay": 0.02, "decay_share": 0.5, "decay_shape": "cosine"}  # fmt: skip
    set_params(root, {**{f"pretrain.{k}": v for k, v in shared.items()}, "seed": 99,
                      **{f"pretrain.{phase}.{k}": v for k, v in per_phase.items()}})  # fmt: skip
    shutil.copytree(root / "data/weights/random", root / "data/weights/phase1")  # phase 2's start
    monkeypatch.chdir(root)
    calls = capture_training(monkeypatch)
    pretrain.pretrain(load_params(), phase, ALONE)
    (batches, optimizer, scheduler, run) = calls[0]
    recipe = Recipe(
        optimizer="lamb", learning_rate=3e-4, warmup_proportion=0.25, decay_power=2.0, weight_decay=0.02,
        grad_clip=0.5, global_batch_size=6, micro_batch_size=3, seed=99, schedule="poly", decay_share=0.5,
        decay_shape="cosine",
    )  # fmt: skip
    folders = tuple(
        map(
            Path, (f"data/checkpoints/{phase}", f"dvclive/pretrain_{phase}", f"metrics/pretrain_{phase}.json")
        )
    )
    check_run(run, recipe, RUN, 12, folders, {"unpad": False, "use_apex": False, "data_workers": 0})
    # The checkpoints' signature holds the recipe as fine-tuning's does, and the data.
    assert run["record"].description["recipe"] == described_recipe(recipe, length_binning=True)
    assert run["record"].description["phase"] == phase
    assert (batches.global_batch, batches.micro_batch, batches.accumulation_steps) == (6, 3, 2)
    assert batches.seed == 99 and batches.length_binning
    check_optimizer_and_schedule(optimizer, scheduler, recipe, 12)
    # The phase's schedule: wsd from params alone (decay over the last half of 12 steps, cosine).
    set_params(root, {f"pretrain.{phase}.schedule": "wsd"})
    wsd = load_params().recipe(phase)
    assert wsd.schedule == "wsd" and decay_start(wsd, 12) == 6
    model = tiny_model(seed=0, dropout=0.0)
    factor = learning_rate_schedule(recipe_optimizer(model, wsd, use_apex=False), wsd, 12).lr_lambdas[0]
    assert [factor(s) for s in (3, 5, 6, 9)] == pytest.approx([1.0, 1.0, 1.0, 0.5])


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


WSD_WARMUP_PAST_DECAY = (
    "is over 1: under schedule wsd the warm-up would run past the start of the decay, so the rate would "
    "decay late or not at all; lower one of them so that they add up to at most 1"
)


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"pretrain.phase2.schedule": "wsd", "pretrain.phase2.warmup_proportion": 0.9, "pretrain.phase2.decay_share": 0.5},
         "pretrain.phase2.warmup_proportion 0.9 + pretrain.phase2.decay_share 0.5"),
        ({"finetune.recipe.schedule": "wsd", "finetune.recipe.warmup_proportion": 0.6, "finetune.recipe.decay_share": 0.5},
         "finetune.recipe.warmup_proportion 0.6 + finetune.recipe.decay_share 0.5"),
        ({"finetune.recipe.schedule": "wsd", "squad.recipe": {"decay_share": 0.95}},
         "finetune.recipe with squad.recipe: warmup_proportion 0.1 + decay_share 0.95"),
    ],
    ids=["phase", "finetune", "squad-override"],
)  # fmt: skip
def test_a_wsd_warmup_past_the_decay_start_is_one_line_naming_the_params(
    tmp_path, monkeypatch, changes, named
):
    """Warm-up 0.9 and decay 0.5 of the steps: the decay would start at the end of the warm-up, and a
    short run's last step would be at the peak rate."""
    write_params(tmp_path, changes)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as error:
        load_params()
    assert str(error.value) == f"params.yaml: {named} {WSD_WARMUP_PAST_DECAY}"


def test_a_task_recipe_whose_wsd_warmup_passes_the_decay_start_stops_its_stage_in_one_line(tmp_path):
    write_params(
        tmp_path, {"finetune.recipe.schedule": "wsd", "tasks.rte.recipe": {"warmup_proportion": 0.9}}
    )
    result = stage_command(tmp_path, "stages.finetune_task", "rte")
    assert result.returncode == 1
    assert result.stderr == (
        "error: params.yaml: finetune.recipe with tasks.rte.recipe: warmup_proportion 0.9 + decay_share 0.2 "
        f"{WSD_WARMUP_PAST_DECAY}\n"
    )


def test_the_library_recipe_refuses_a_wsd_warmup_past_the_decay_start():
    fields = dict(optimizer="adamw", learning_rate=1.0, decay_power=1.0, weight_decay=0.0, grad_clip=1.0,
                  global_batch_size=1, micro_batch_size=1, seed=0, decay_shape="linear", schedule="wsd")  # fmt: skip
    with pytest.raises(UserError) as error:
        Recipe(warmup_proportion=0.9, decay_share=0.5, **fields)
    assert str(error.value) == f"recipe: warmup_proportion 0.9 + decay_share 0.5 {WSD_WARMUP_PAST_DECAY}"
    with pytest.raises(UserError):
        dataclasses.replace(
            FineTuningRecipe(warmup_proportion=0.1, decay_share=0.5, epochs=1, **fields),
            warmup_proportion=0.7,
        )
    # Adding up to 1: warm-up, then the decay, no stable part; every step after the warm-up decays.
    edge = Recipe(warmup_proportion=0.7, decay_share=0.3, **fields)
    factor = learning_rate_schedule(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), edge, 10
    ).lr_lambdas[0]
    assert [factor(step) for step in (6, 7, 9)] == pytest.approx([1.0, 1.0, 1 / 3])
    Recipe(
        warmup_proportion=0.9, decay_share=0.5, **{**fields, "schedule": "poly"}
    )  # poly has no decay share
