"""Paths live in one place: stages/common/layout.py. No stage or script spells a pipeline path itself,
and every output dvc.yaml declares is a path the layout gives (so the two cannot drift apart)."""

import ast
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
