"""The DAG follows params.yaml: the corpora are whatever `corpora` names, and fine-tuning depends on
the weights `finetune.init` names only, so released weights never pull in a corpus or pretraining.

Each test works on a throw-away DVC project made of the working tree's tracked files."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from safetensors import safe_open

from tests.support.stage_workspace import copy_project, set_params

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLE_WIKIPEDIA = {
    "kind": "wikipedia",
    "columns": [],
    "sources": [
        "data/sample/wikipedia/samplewiki-20260101-pages-articles-multistream.xml.bz2",
        "data/sample/wikipedia/samplewiki-20260101-pages-articles-multistream-index.txt.bz2",
    ],
    "checksums": [],
}
CORPUS_STAGES = re.compile(r"^(download@|documents@|shard@|vocab$|examples@|pretrain@|init_random$)")


def run(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    # One OpenMP thread a stage, as tests/support's run_stage: `make test` runs two test files at
    # once on two cores, and torch's threads spin-waiting for a busy core cost 2-4x the CPU time.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONUNBUFFERED": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def small_squad(project: Path, train_questions: int = 32, dev_questions: int = 24) -> dict:
    """The squad.sources params for the first questions of the sample world's SQuAD v1.1 files,
    written into the project: fine-tuning takes two steps of 16 windows (one epoch) and prediction a
    few dozen windows, while every SQuAD stage runs as on the whole files."""
    folder = project / "small-squad"
    folder.mkdir()
    files = {}
    for split, count in (("train", train_questions), ("dev", dev_questions)):
        dataset = json.loads((REPO / f"data/sample/squad/v1.1/{split}-v1.1.json").read_text(encoding="utf-8"))
        articles, left = [], count
        for article in dataset["data"]:
            paragraphs = []
            for paragraph in article["paragraphs"]:
                if left > 0:
                    paragraphs.append({**paragraph, "qas": paragraph["qas"][:left]})
                    left -= len(paragraphs[-1]["qas"])
            if paragraphs:
                articles.append({**article, "paragraphs": paragraphs})
        (folder / f"{split}-v1.1.json").write_text(
            json.dumps({**dataset, "data": articles}), encoding="utf-8"
        )
        files[split] = f"small-squad/{split}-v1.1.json"
    sources = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))["squad"]["sources"]
    return {**sources, "v1.1": files}


def planned(project: Path, target: str) -> list[str]:
    """The stages `dvc repro target` runs in a new project: the target and its ancestors (dvc dag)."""
    output = run([str(BIN / "dvc"), "dag", "--md", target], cwd=project).stdout
    return re.findall(r'node\d+\["([^"]+)"\]', output)


@pytest.fixture
def project(tmp_path) -> Path:
    return copy_project(tmp_path / "project")


def test_only_decontaminate_remove_puts_the_evaluation_sets_upstream_of_pretraining(project):
    evaluation = {"eval_texts", "download_squad@v1.1", "download_task@rte"}
    report = set(planned(project, "pretrain@phase1"))  # the default, report
    assert {"clean", "shard@wikipedia"} <= report and not evaluation & report
    assert evaluation <= set(planned(project, "contamination"))
    set_params(project, {"clean.decontaminate": "remove"})
    assert evaluation <= set(planned(project, "pretrain@phase1"))
    set_params(project, {"clean.decontaminate": "none"})
    assert not evaluation & set(planned(project, "pretrain@phase1"))


def test_released_weights_need_no_corpus_and_no_pretraining(project):
    pretraining = planned(project, "finetune_squad")
    assert {"download@wikipedia", "vocab", "init_random", "pretrain@phase1", "pretrain@phase2"} <= set(
        pretraining
    )
    set_params(project, {"finetune.init": "google-base-uncased"})
    released = planned(project, "finetune_squad")
    assert sorted(released) == [
        "download_squad@v1.1", "download_weights@google-base-uncased", "finetune_squad@v1.1", "sources"
    ]  # fmt: skip
    # SWAG and GLUE start from the same weights, and the GLUE score needs only the tasks tasks.run names.
    swag = planned(project, "evaluate_task@swag")
    assert sorted(swag) == ["download_task@swag", "download_weights@google-base-uncased", "evaluate_task@swag",
                            "finetune_task@swag", "predict_task@swag", "sources"]  # fmt: skip
    set_params(project, {"tasks.run": {"mrpc": "finetune.init", "rte": "finetune.init"}})
    glue = planned(project, "glue_score")
    assert {stage.split("@")[1] for stage in glue if "@" in stage and "_task@" in stage} == {"mrpc", "rte"}
    assert not any(CORPUS_STAGES.match(stage) for stage in glue)
    set_params(project, {"finetune.init": "random"})
    random_start = planned(project, "finetune_squad")
    assert "init_random" in random_start and not any(stage.startswith("pretrain@") for stage in random_start)


def test_pretraining_from_released_weights_follows_them(project):
    """pretrain.phases starting from Google's weights: they are fetched and continued: download ->
    vocab -> examples -> phase 1 -> phase 2 -> fine-tuning, with no random initialisation anywhere."""
    set_params(project, {"pretrain.phases.phase1": "google-base-uncased", "vocab.source": "weights"})
    stages = planned(project, "finetune_squad")
    assert "init_random" not in stages
    assert {"download@wikipedia", "download_weights@google-base-uncased", "vocab", "examples@phase1",
            "pretrain@phase1", "pretrain@phase2", "finetune_squad@v1.1"} <= set(stages)  # fmt: skip
    assert not [
        stage for stage in stages if stage.startswith("download_weights@") and stage.endswith("-cased")
    ]
    edges = run([str(BIN / "dvc"), "dag", "--md", "finetune_squad"], cwd=project).stdout
    names = dict(re.findall(r'(node\d+)\["([^"]+)"\]', edges))
    arrows = {(names[a], names[b]) for a, b in re.findall(r"(node\d+)-->(node\d+)", edges)}
    path = ["vocab", "examples@phase1", "pretrain@phase1", "pretrain@phase2", "finetune_squad@v1.1"]
    assert ("download_weights@google-base-uncased", "pretrain@phase1") in arrows
    assert all((a, b) in arrows for a, b in zip(path, path[1:])), sorted(arrows)


def test_a_task_started_from_another_depends_on_it(project):
    """tasks.run.rte: mnli makes finetune_task@mnli a dependency of finetune_task@rte; a task from
    finetune.init depends on no other task (its dep is the committed placeholder)."""
    assert (REPO / "data/models/tasks/finetune.init/README.txt").is_file()
    set_params(project, {"tasks.run": {"mnli": "finetune.init", "rte": "mnli", "mrpc": "finetune.init"}})
    edges = run([str(BIN / "dvc"), "dag", "--md", "evaluate_task@rte"], cwd=project).stdout
    names = dict(re.findall(r'(node\d+)\["([^"]+)"\]', edges))
    arrows = {(names[a], names[b]) for a, b in re.findall(r"(node\d+)-->(node\d+)", edges)}
    assert ("finetune_task@mnli", "finetune_task@rte") in arrows
    assert not [stage for stage in planned(project, "finetune_task@mrpc") if stage.startswith("finetune_task@m")
                and stage != "finetune_task@mrpc"]  # fmt: skip


def test_one_phase_plans_no_other(project):
    """pretrain.phases with one phase: the other's examples and pretraining are not stages at all,
    and fine-tuning starts from the phase there is."""
    assert {"examples@phase2", "pretrain@phase2"} <= set(planned(project, "finetune_squad"))
    set_params(project, {"pretrain.phases": {"phase1": "random"}, "finetune.init": "phase1"})
    listed = run([str(BIN / "dvc"), "stage", "list", "--name-only"], cwd=project).stdout.split()
    assert "pretrain@phase1" in listed and not [stage for stage in listed if stage.endswith("@phase2")]
    assert {"init_random", "examples@phase1", "pretrain@phase1"} <= set(planned(project, "finetune_squad"))


SQUAD_STAGES = re.compile(r"^(download_squad|finetune_squad|predict_squad|evaluate_squad|benchmark)(@|$)")


def test_squad_can_be_left_out(project):
    """squad.run: [] leaves no SQuAD stage in the DAG, the evaluation texts (the contamination
    report's) come from the tasks alone, and the tasks still get the weights finetune.init names."""
    listed = run([str(BIN / "dvc"), "stage", "list", "--name-only"], cwd=project).stdout.split()
    assert sorted(filter(SQUAD_STAGES.match, listed)) == [
        "benchmark@v1.1", "download_squad@v1.1", "evaluate_squad@v1.1", "finetune_squad@v1.1", "predict_squad@v1.1"
    ]  # fmt: skip
    set_params(project, {"squad.run": [], "tasks.run": {"rte": "finetune.init"}})
    listed = run([str(BIN / "dvc"), "stage", "list", "--name-only"], cwd=project).stdout.split()
    assert not list(filter(SQUAD_STAGES.match, listed)) and "evaluate_task@rte" in listed
    assert sorted(planned(project, "contamination")) == [
        "clean", "contamination", "documents@bookcorpus", "documents@wikipedia", "download@bookcorpus",
        "download@wikipedia", "download_task@rte", "eval_texts", "sources",
    ]  # fmt: skip
    assert "pretrain@phase2" in planned(project, "evaluate_task@rte")
    set_params(project, {"finetune.init": "google-base-uncased"})
    assert "download_weights@google-base-uncased" in planned(project, "evaluate_task@rte")
    output = run([str(BIN / "dvc"), "repro", "eval_texts"], cwd=project).stdout
    assert sorted(re.findall(r"Running stage '([^']+)'", output)) == [
        "download_task@rte",
        "eval_texts",
        "sources",
    ]
    texts = pq.read_table(project / "data/decontaminate/remove/eval_texts.parquet").column("set").to_pylist()
    assert set(texts) == {"rte"}
    assert not (project / "data/sources/squad").exists()


def test_every_curve_folder_persists_across_reruns():
    """DVC deletes a stage's outputs before running it again, so a training stage resumed after a
    kill would lose the curve of the steps before its checkpoint; `persist: true` keeps it (the
    training loop drops what it logged after the checkpoint, tests/test_faults.py)."""
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    curves = {}
    for name, stage in stages.items():
        for out in stage.get("do", stage).get("outs", []):
            path, options = next(iter(out.items())) if isinstance(out, dict) else (out, {})
            if path.startswith("dvclive/"):
                curves[name] = options
    assert sorted(curves) == ["finetune_squad", "finetune_task", "pretrain"]
    for name, options in curves.items():
        assert options.get("persist") is True and options.get("cache") is False, (name, options)


def test_corpora_are_params(project):
    set_params(
        project,
        {
            "corpora": {
                "wikipedia": SAMPLE_WIKIPEDIA,
                "notes": {
                    "kind": "text",
                    "columns": [],
                    "sources": ["data/sample/books/txt"],
                    "checksums": [],
                },
            },
            "mixing.weights": {"wikipedia": 1.0, "notes": 2.0},
        },
    )
    stages = planned(project, "examples@phase1")
    assert set(stages) == {
        *(
            f"{stage}@{corpus}"
            for stage in ("download", "documents", "shard")
            for corpus in ("wikipedia", "notes")
        ),
        "clean",
        "vocab",
        "examples@phase1",
        "sources",
    }


def test_the_documented_reset_after_an_experiment_works_in_a_fresh_clone(tmp_path):
    """docs/experiments.md's reset, in a clone whose cache never held the committed demo's outputs,
    after an experiment that changed params, the lock, a metric and an output: it exits 0 with no
    ERROR, the tracked files are the commit's again, and the experiment's output has left the
    workspace (dvc status: not in cache, so dvc repro builds the commit's)."""
    console = (REPO / "docs/experiments.md").read_text(encoding="utf-8")
    (reset,) = re.findall(r"^\$ (git checkout .*dvc checkout.*)$", console, flags=re.MULTILINE)
    clone = copy_project(tmp_path / "clone", with_results=True)
    set_params(clone, {"squad.recipe.learning_rate": 0.003})
    (clone / "metrics/glue.json").write_text('{"score": 1.0}', encoding="utf-8")
    (clone / "data/tasks/rte").mkdir(parents=True)
    (clone / "data/tasks/rte/train.tsv").write_text("an experiment's output\n", encoding="utf-8")
    # Cached, as dvc exp run caches what it builds, and the lock rewritten.
    run([str(BIN / "dvc"), "commit", "--force", "download_task@rte"], cwd=clone)
    assert run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone).stdout.strip()
    done = run(["bash", "-c", reset], cwd=clone)
    assert "ERROR" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone).stdout == ""
    assert not (clone / "data/tasks/rte").exists()
    assert "not in cache" in run([str(BIN / "dvc"), "status", "download_task@rte"], cwd=clone).stdout


def test_metrics_and_curves_of_stages_taken_out_of_the_dag_leave(tmp_path):
    """A task removed from tasks.run and SQuAD left out: `dvc metrics show` lists only the current
    stages' metrics, and scripts.prune_outputs removes the committed files of the others (the
    curves dvc.yaml's plots would still draw), keeping every current stage's."""
    clone = copy_project(tmp_path / "clone", with_results=True)
    prune = [sys.executable, "-m", "scripts.prune_outputs"]
    assert "nothing to remove" in run(prune, cwd=clone).stdout  # the demo's: every file is current
    set_params(clone, {"squad.run": [], "tasks.run": {"rte": "finetune.init"}})
    shown = json.loads(run([str(BIN / "dvc"), "metrics", "show", "--json"], cwd=clone).stdout)
    files = {path for revision in shown.values() for path in revision["data"]}
    assert {"metrics/tasks/rte.json", "metrics/finetune_task/rte.json", "metrics/glue.json"} <= files
    assert not {path for path in files if "squad" in path or "benchmark" in path or "cola" in path}
    named = run([*prune, "--dry-run"], cwd=clone).stdout
    assert "would remove dvclive/finetune_squad/" in named and (clone / "dvclive/finetune_squad").is_dir()
    removed = run(prune, cwd=clone).stdout
    assert {"metrics/squad.json", "metrics/benchmark.json", "metrics/finetune_squad.json",
            "metrics/tasks/cola.json", "dvclive/finetune_task/cola/"} <= set(removed.replace("removed ", "").split())  # fmt: skip
    left = {
        str(path.relative_to(clone))
        for root in ("metrics", "dvclive")
        for path in (clone / root).rglob("*.json")
    }
    assert not {path for path in left if "squad" in path or "benchmark" in path or "cola" in path}
    assert {"metrics/tasks/rte.json", "dvclive/finetune_task/rte/metrics.json", "metrics/clean.json"} <= left
    assert "nothing to remove" in run(prune, cwd=clone).stdout


@pytest.mark.slow
def test_wikipedia_only_data_pipeline_runs(project):
    """One corpus is a complete pipeline: its documents, shards, vocabulary and examples."""
    set_params(
        project,
        {
            "corpora": {"wikipedia": SAMPLE_WIKIPEDIA},
            "mixing.weights": {"wikipedia": 1.0},
            "examples.dupe_factor": 1,
        },
    )
    run([str(BIN / "dvc"), "repro", "examples@phase1"], cwd=project)
    manifest = json.loads((project / "data/examples/phase1/manifest.json").read_text())
    assert manifest["instances"] > 0 and list(manifest["corpora"]) == ["wikipedia"]
    assert not (project / "data/raw/bookcorpus").exists()


@pytest.mark.slow
def test_fine_tune_only_run_from_a_real_checkpoint(project, minilm_dir):
    """MiniLM (a real BERT checkpoint in Hugging Face format) through `dvc repro evaluate_squad`:
    it is fetched like Google's weights, and nothing of the corpora or pretraining is built."""
    set_params(
        project,
        {
            "weights.minilm": str(minilm_dir),
            "finetune.init": "minilm",
            "squad.sources": small_squad(project),  # a few steps: what is tested is what runs, not the F1
            "squad.recipe.epochs": 1,
            "squad.recipe.learning_rate": 1e-4,
            "squad.max_seq_length": 128,
            "vocab.lower_case": True,
        },
    )
    output = run([str(BIN / "dvc"), "repro", "evaluate_squad"], cwd=project).stdout
    ran = re.findall(r"Running stage '([^']+)'", output)
    assert sorted(ran) == [
        "download_squad@v1.1",
        "download_weights@minilm",
        "evaluate_squad@v1.1",
        "finetune_squad@v1.1",
        "predict_squad@v1.1",
        "sources",
    ]
    assert not any(CORPUS_STAGES.match(stage) for stage in ran)
    built = [p for p in (project / "data").glob("*/*") if p.name != ".gitignore"]
    assert not [p for p in built if p.parent.name in ("raw", "documents", "shards", "vocab", "examples")], (
        built
    )
    built_models = [p.name for p in (project / "data/models").iterdir() if not p.name.startswith(".")]
    # data/models/tasks holds the task models' .gitignore and the placeholder, committed; no task stage ran
    assert sorted(built_models) == ["squad", "tasks"]
    assert sorted(os.listdir(project / "data/models/tasks")) == [".gitignore", "finetune.init"]
    assert sorted(p.name for p in (project / "data/weights").iterdir() if not p.name.startswith(".")) == [
        "minilm"
    ]
    metrics = json.loads((project / "metrics/squad.json").read_text())
    assert metrics["questions"] > 0 and 0 <= metrics["f1"] <= 100


@pytest.mark.slow
def test_continued_mlm_only_pretraining_of_a_real_checkpoint_then_squad(project, minilm_dir):
    """MiniLM continued on the sample corpus in one phase at 128 (its vocabulary, MLM only, as
    domain-adaptive runs are) for a few steps, then fine-tuned on SQuAD, all through `dvc repro`:
    phase 1's examples and pretraining are never planned."""
    phase = {"max_steps": 3, "global_batch_size": 8, "micro_batch_size": 8, "learning_rate": 1e-4,
             "schedule": "poly", "decay_share": 0.2, "decay_shape": "1-sqrt"}  # fmt: skip
    set_params(
        project,
        {
            "weights.minilm": str(minilm_dir),
            "pretrain.phases": {"phase2": "minilm"},  # `dvc exp run -S '~pretrain.phases.phase1' ...`
            "vocab.source": "weights",
            "vocab.lower_case": True,
            "examples.next_sentence": False,
            "examples.masked_lm_prob": 0.3,
            "examples.dupe_factor": 1,
            "examples.phase2": {"max_seq_length": 128, "max_predictions_per_seq": 40},
            "pretrain.optimizer": "adamw",
            "pretrain.phase2": {**phase, "warmup_proportion": 0.0, "weight_decay": 0.01,
                                "init_optimizer_from_phase1": False},
            "squad.sources": small_squad(project),
            "squad.recipe.epochs": 1,
            "squad.recipe.learning_rate": 1e-4,
            "squad.max_seq_length": 128,
        },
    )  # fmt: skip
    done = run([str(BIN / "dvc"), "repro", "evaluate_squad"], cwd=project)
    ran = re.findall(r"Running stage '([^']+)'", done.stdout)
    assert {"download_weights@minilm", "vocab", "examples@phase2", "pretrain@phase2"} <= set(ran)
    # What the stages tell the user: MiniLM's pooler is carried by pretraining (not "weights not
    # used"; SQuAD's model has no pooler, and says so), and an MLM-only run has no random next
    # segments to count (no "0.0% random next").
    logged = done.stdout + done.stderr
    assert "weights not used by BertForPreTraining" not in logged and "% random next" not in logged
    assert "the pretraining stage carries them unchanged to its export: bert.pooler.dense.bias" in logged
    assert not {"init_random", "examples@phase1", "pretrain@phase1"} & set(ran)
    assert not (project / "data/examples/phase1").exists() and not (project / "data/weights/phase1").exists()
    assert (project / "data/vocab/vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes()
    phase = json.loads((project / "metrics/pretrain_phase2.json").read_text())
    # MiniLM has no MLM head: its fresh one starts at chance (ln 30522 = 10.3) and learns at once
    # on MiniLM's features (docs/performance.md, "Continued pretraining")
    assert phase["steps"] == 3 and "nsp_loss" not in phase and phase["loss"] < phase["first_loss"]
    transformers = pytest.importorskip("transformers")
    _, info = transformers.BertForMaskedLM.from_pretrained(
        project / "data/weights/phase2", output_loading_info=True
    )
    # MiniLM's pooler, which MLM does not train, is carried to the export unchanged (BertForMaskedLM
    # has no pooler: to it, the only unused tensors); fine-tuning starts from it, not a fresh one
    assert not info["missing_keys"] and set(info["unexpected_keys"]) == {
        "bert.pooler.dense.weight",
        "bert.pooler.dense.bias",
    }
    exported = safe_open(project / "data/weights/phase2/model.safetensors", "pt")
    released = safe_open(minilm_dir / "model.safetensors", "pt")
    assert torch.equal(
        exported.get_tensor("bert.pooler.dense.weight"), released.get_tensor("pooler.dense.weight")
    )
    metrics = json.loads((project / "metrics/squad.json").read_text())
    assert metrics["questions"] > 0 and 0 <= metrics["f1"] <= 100
