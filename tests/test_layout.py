"""Paths live in one place: stages/common/layout.py. No stage or script spells a pipeline path itself,
and every output dvc.yaml declares is a path the layout gives (so the two cannot drift apart)."""

import ast
import dataclasses
from pathlib import Path

import yaml

from stages.common import layout

REPO = Path(__file__).resolve().parents[1]
PIPELINE_ROOTS = ("data/", "metrics/", "dvclive/")


def spelled_paths(source: Path) -> list[str]:
    """String constants (f-string pieces too) that begin like a pipeline path."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            first = node.value.split()[0] if node.value.split() else ""
            if first.startswith(PIPELINE_ROOTS) and node.lineno:
                found.append(f"{source.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    return found


def test_no_stage_or_script_spells_a_pipeline_path():
    """Docstrings may describe the files; code takes them from stages.common.layout."""
    offenders = []
    for source in [*sorted((REPO / "stages").glob("*.py")), *sorted((REPO / "scripts").glob("*.py"))]:
        if source.name == "layout.py":
            continue
        docstrings = set()
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and ast.get_docstring(node):
                docstrings.add(node.body[0].value.lineno)
        offenders += [line for line in spelled_paths(source) if int(line.split(":")[1]) not in docstrings]
    assert offenders == []


def expected_outputs(params: dict) -> set[str]:
    corpora, phases, tasks = (
        list(params["corpora"]),
        list(params["pretrain"]["phases"]),
        params["tasks"]["run"],
    )
    paths = {layout.VOCAB_DIR, layout.metrics("glue"), layout.SOURCES}
    if params["squad"]["run"]:  # the SQuAD stages, when squad.run names a version
        paths |= {layout.SQUAD_TRAIN, layout.SQUAD_DEV, layout.model("squad"), layout.live("squad"),
                  layout.training_metrics("squad"), layout.SQUAD_PREDICTIONS, layout.metrics("squad"),
                  layout.metrics("benchmark")}  # fmt: skip
    paths |= {layout.CLEAN_DIR, layout.CLEAN_METRICS, layout.CLEAN_SAMPLES, layout.EVAL_TEXTS_DIR,
              layout.CONTAMINATION_METRICS}  # fmt: skip
    for corpus in corpora:
        paths |= {layout.raw(corpus), layout.documents(corpus), layout.shards(corpus),
                  layout.documents_metrics(corpus), layout.shard_metrics(corpus)}  # fmt: skip
    for phase in phases:
        paths |= {layout.examples(phase), layout.weights(phase), layout.live(phase),
                  layout.training_metrics(phase)}  # fmt: skip
    for name in ["random", *params["weights"]]:
        paths.add(layout.weights(name))
    for task in tasks:
        paths |= {layout.task_data(task), layout.model(task), layout.live(task),
                  layout.training_metrics(task), layout.task_predictions(task),
                  layout.task_metrics(task)}  # fmt: skip
    return {str(path) for path in paths}


def test_every_output_dvc_yaml_declares_is_a_layout_path():
    from dvc.repo import Repo

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    with Repo(str(REPO)) as repo:
        declared = {out.def_path for stage in repo.index.stages for out in stage.outs}
    assert declared == expected_outputs(params)


def test_every_output_lies_in_an_output_folder_and_no_log_or_checkpoint_does():
    """OUTPUT_FOLDERS is what the training stages keep BERT_LOG_DIR out of: it must hold every
    output, and not the folders where logs and checkpoints belong."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    folders = [Path(folder) for folder in layout.OUTPUT_FOLDERS]
    outside = [
        out for out in expected_outputs(params) if not any(Path(out).is_relative_to(f) for f in folders)
    ]
    assert outside == []
    for run in ("phase1", "squad", "tasks/rte"):
        for kept in (layout.logs(run), layout.checkpoints(run)):
            assert not any(kept.is_relative_to(f) or f.is_relative_to(kept) for f in folders), kept


def test_each_run_kind_keeps_its_folders_and_stage_names():
    """A phase, SQuAD and a task differ by their run kind (layout.run_kind), not by names compared
    in each function: the paths are the ones dvc.yaml and earlier runs' checkpoints use."""
    assert layout.checkpoints("phase1") == Path("data/checkpoints/phase1")
    assert layout.checkpoints(layout.SQUAD) == Path("data/checkpoints/squad")
    assert layout.checkpoints("rte") == Path("data/checkpoints/tasks/rte")
    assert layout.model("mnli") == Path("data/models/tasks/mnli") and layout.model("squad") == Path(
        "data/models/squad"
    )
    assert [layout.live(run) for run in ("phase2", "squad", "swag")] == [
        Path("dvclive/pretrain_phase2"), Path("dvclive/finetune_squad"), Path("dvclive/finetune_task/swag")
    ]  # fmt: skip
    assert layout.training_metrics("rte") == Path("metrics/finetune_task/rte.json")
    assert [layout.weights_stage(name) for name in ("phase1", "random", "google-base-uncased")] == [
        "pretrain@phase1", "init_random", "download_weights@google-base-uncased"
    ]  # fmt: skip
    assert [layout.run_kind(run).of(run, "recipe") for run in ("phase1", "squad", "rte")] == [
        "pretrain.phase1", "squad.recipe", "tasks.rte.recipe"
    ]  # fmt: skip


def test_phases_and_tasks_are_named_once():
    """The phases are layout.PHASES and the tasks bert.tasks.catalogue.TASKS: the params schema
    takes a block for each of them, and no module of the pipeline spells either list again."""
    from bert.tasks.catalogue import TASKS
    from stages.common.params import Examples, Pretrain, Tasks

    assert [field.name for field in dataclasses.fields(Examples)] == list(layout.PHASES)
    assert [
        name for name in layout.PHASES if name in {field.name for field in dataclasses.fields(Pretrain)}
    ] == list(layout.PHASES)
    assert [field.name for field in dataclasses.fields(Tasks)] == ["run", *TASKS]
    spellings = {'"phase1", "phase2"': "stages/common/layout.py", '"cola", "sst2"': "bert/tasks/catalogue.py"}
    for source in sorted(
        [*(REPO / "stages").rglob("*.py"), *(REPO / "scripts").glob("*.py"), *(REPO / "bert").rglob("*.py")]
    ):
        text = source.read_text(encoding="utf-8")
        for spelled, home in spellings.items():
            assert spelled not in text or source == REPO / home, (
                f"{source.relative_to(REPO)} spells {spelled}"
            )
