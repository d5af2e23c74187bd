"""dvc.yaml's deps are exactly each stage's import closure (scripts/stage_deps.py computes it and
`python -m scripts.stage_deps --write` rewrites them), and the layers keep what an edit reruns
small."""

from pathlib import Path

from scripts.stage_deps import REPO, import_closure, stage_dep_problems


def test_every_stage_lists_exactly_the_project_files_it_imports():
    problems = stage_dep_problems()
    assert not problems, "dvc.yaml deps are out of date:\n" + "\n".join(problems)


def test_a_removed_dep_line_is_caught(tmp_path):
    """The check is not vacuous: drop one source file from one stage's deps and it names both."""
    text = (REPO / "dvc.yaml").read_text()
    victim = "        - stages/evaluate_squad.py\n"
    assert victim in text
    for folder in ("bert", "stages", "bench", "sample_world"):
        if (REPO / folder).is_dir():
            (tmp_path / folder).symlink_to(REPO / folder)
    (tmp_path / "dvc.yaml").write_text(text.replace(victim, "", 1))
    (tmp_path / "params.yaml").symlink_to(REPO / "params.yaml")
    assert stage_dep_problems(tmp_path) == [
        "stage evaluate_squad@v1.1: imports stages/evaluate_squad.py, which its deps do not list"
    ]


def test_lazy_imports_count(tmp_path):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "__init__.py").write_text("")
    (tmp_path / "bert" / "a.py").write_text("def f():\n    from bert import b\n    return b\n")
    (tmp_path / "bert" / "b.py").write_text("import os\n")
    assert import_closure("bert.a", tmp_path) == {
        Path("bert/__init__.py"),
        Path("bert/a.py"),
        Path("bert/b.py"),
    }


def stages_by_dep(root: Path = REPO) -> dict[str, set[str]]:
    """Each dep path -> the stages whose deps include it, as DVC itself reads dvc.yaml (foreach
    expanded): one read of the project for every path asked about."""
    from dvc.repo import Repo

    depending: dict[str, set[str]] = {}
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            for dep in stage.deps:
                depending.setdefault(dep.def_path, set()).add(stage.addressing)
    return depending


def test_an_edit_to_the_downloader_reruns_only_what_downloads():
    """The layers DVC reruns by: the downloader (transport, checksums, staging) is imported by the
    download stages, the vocabulary (Google's is downloaded) and `sources` (which reads a source's
    local path the way the transport does, and whose manifests do not change when the code does), and
    by nothing that trains, predicts or evaluates, so fixing a download bug never retrains a model."""
    depending = stages_by_dep()

    def stages_depending_on(path: str) -> set[str]:
        return depending.get(path, set())

    for downloader in sorted((REPO / "bert/download").glob("*.py")):
        affected = {name.split("@")[0] for name in stages_depending_on(str(downloader.relative_to(REPO)))}
        assert affected <= {
            "sources",
            "download",
            "download_squad",
            "download_weights",
            "download_task",
            "vocab",
        }, downloader
    fetch = {name.split("@")[0] for name in stages_depending_on("bert/download/fetch.py")}
    assert fetch == {"download", "download_squad", "download_weights", "download_task", "vocab"}
    tokenizer = {name.split("@")[0] for name in stages_depending_on("bert/text/tokenization.py")}
    assert {"finetune_squad", "finetune_task", "predict_squad", "examples"} <= tokenizer
