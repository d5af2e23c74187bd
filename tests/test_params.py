"""params.yaml is read through one typed schema without defaults and rejected early, in one line
naming the param, the value and what it may be."""

import dataclasses
import json
import math
import os
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Literal

import pytest
import yaml

from bert.errors import UserError
from stages.common.params import Params, load_params
from stages.common.schema import Given
from tests.support.stage_workspace import copy_project, repo_params, run_stage, write_params

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MISSING_HINT = "add it (the repository's params.yaml has every key, with its meaning)"
# Mappings whose keys are names the user chooses, not schema fields: deleting one of their entries
# is a change of content (one corpus fewer), not a missing key.
NAMED_ENTRIES = {
    ("corpora",),
    ("mixing", "weights"),
    ("pretrain", "phases"),
    ("squad", "sources"),
    ("tasks", "run"),
    ("weights",),
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A temp project folder to load params from (stages run from the project root)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rejection(root: Path, changes: dict) -> str:
    write_params(root, changes)
    with pytest.raises(UserError) as error:
        load_params()
    return str(error.value)


def test_committed_params_load_cleanly(monkeypatch):
    monkeypatch.chdir(REPO)
    params = load_params()
    assert params.vocab.vocab_size == 8192 and params.squad.max_seq_length == 192
    assert params.recipe("squad").epochs == 4 and params.recipe("squad").learning_rate == 0.001
    assert params.recipe("rte").epochs == 3 and params.recipe("rte").learning_rate == 0.0005
    assert params.pretrain.length_binning and params.finetune.length_binning
    assert params.examples.phase1.max_seq_length == 128 and params.examples.phase2.max_seq_length == 512
    assert params.compute.scheduler == "local" and params.compute.workers >= 1
    check = run_stage(REPO, "stages.common.params")  # the docs' check of params.yaml alone
    assert check.returncode == 0 and check.stdout.startswith("params.yaml: every param fits"), check.stderr


def test_the_schema_does_not_import_torch():
    """Every stage loads params; the data stages must not pay for (nor depend on) the model code."""
    code = "import sys, stages.common.params; print(sorted(m for m in sys.modules if m.startswith(('torch', 'bert.'))))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert (
        done.stdout.strip()
        == "['bert.cleaning', 'bert.cleaning.settings', 'bert.compute', 'bert.errors', 'bert.inputs', 'bert.model', "
        "'bert.model.presets', 'bert.pretraining', 'bert.pretraining.examples', 'bert.ranges', 'bert.tasks', "
        "'bert.tasks.catalogue', 'bert.training', "
        "'bert.training.recipe']"
    )


def test_numbers_written_as_strings_are_numbers(project):
    # `dvc exp run -S squad.recipe.learning_rate=6e-5` writes 6e-05, which YAML 1.1 reads as a string.
    write_params(project, {"squad.recipe.learning_rate": "6e-05", "pretrain.phase1.max_steps": "1e3"})
    assert (
        yaml.safe_load((project / "params.yaml").read_text())["squad"]["recipe"]["learning_rate"] == "6e-05"
    )
    params = load_params()
    assert params.recipe("squad").learning_rate == pytest.approx(6e-5)
    assert params.pretrain.phase1.max_steps == 1000 and isinstance(params.pretrain.phase1.max_steps, int)


def test_threads_per_rank_is_auto_or_a_count(project):
    for value, read in [("auto", "auto"), (4, 4), ("4", 4)]:  # -S writes 4; a hand-quoted "4" is 4 too
        write_params(project, {"distributed.threads_per_rank": value})
        assert load_params().distributed.threads_per_rank == read


def test_model_size_may_be_a_config_file_or_its_folder(project):
    from bert.model.config import BertConfig

    config = {"vocab_size": 99, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}
    (project / "hf").mkdir()
    (project / "hf/config.json").write_text(json.dumps(config))
    for size in ("hf", "hf/config.json"):
        write_params(project, {"model.size": size})
        assert load_params().model.size == size
        assert BertConfig.resolve(size, vocab_size=50).hidden_size == 16  # the model reads the same file
    assert "or a Hugging Face config.json or its folder" in rejection(project, {"model.size": "elsewhere"})


BOOLEAN_TRAP = "YAML reads an unquoted no/off/yes/on as a boolean"
NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        # numbers: finite, integral where counted, and within their range
        ("pretrain.phase1.max_steps", NAN, ["pretrain.phase1.max_steps is nan", "an integer >= 1"]),
        ("pretrain.phase1.max_steps", INF, ["pretrain.phase1.max_steps is inf", "an integer >= 1"]),
        ("pretrain.phase1.max_steps", "nan", ["pretrain.phase1.max_steps is 'nan'", "an integer >= 1"]),
        ("pretrain.phase1.max_steps", -5, ["pretrain.phase1.max_steps is -5", "an integer >= 1"]),
        (
            "pretrain.phase2.micro_batch_size",
            2.5,
            ["pretrain.phase2.micro_batch_size is 2.5", "an integer >= 1"],
        ),
        ("pretrain.phase1.global_batch_size", 0, ["pretrain.phase1.global_batch_size is 0", ">= 1"]),
        ("pretrain.phase2.learning_rate", 0, ["pretrain.phase2.learning_rate is 0", "a finite number > 0"]),
        ("pretrain.phase1.learning_rate", "inf", ["pretrain.phase1.learning_rate is 'inf'", "finite"]),
        ("pretrain.phase1.warmup_proportion", 1.0, ["warmup_proportion is 1.0", "in [0, 1)"]),
        ("pretrain.phase2.weight_decay", -0.01, ["pretrain.phase2.weight_decay is -0.01", ">= 0"]),
        ("pretrain.log_every", 0, ["pretrain.log_every is 0", ">= 1"]),
        ("pretrain.save_every", 0, ["pretrain.save_every is 0", ">= 1"]),
        ("pretrain.keep_last", 0, ["pretrain.keep_last is 0", ">= 1"]),
        ("pretrain.max_nonfinite_steps", 0, ["pretrain.max_nonfinite_steps is 0", ">= 1"]),
        ("pretrain.grad_clip", -1.0, ["pretrain.grad_clip is -1.0", ">= 0 (0 = no clipping)"]),
        ("pretrain.grad_clip", NAN, ["pretrain.grad_clip is nan", "finite"]),
        ("pretrain.data_workers", -1, ["pretrain.data_workers is -1", ">= 0"]),
        ("seed", -1, ["seed is -1", "an integer in [0, 4294967295]"]),
        ("seed", 2**32, ["seed is 4294967296", "in [0, 4294967295]"]),
        ("finetune.recipe.seed", -1, ["finetune.recipe.seed is -1", "in [0, 4294967295]"]),
        ("compute.num_workers", -1, ["compute.num_workers is -1", ">= 0 (0 = all CPU cores)"]),
        (
            "compute.scheduler",
            "slurm",
            ["compute.scheduler is 'slurm'", "allowed: local, dask, or a Dask scheduler"],
        ),
        (
            "finetune.recipe.global_batch_size",
            0,
            ["finetune.recipe.global_batch_size is 0", "an integer >= 1"],
        ),
        ("finetune.save_every", 0, ["finetune.save_every is 0", ">= 1"]),
        ("finetune.log_every", -1, ["finetune.log_every is -1", ">= 1"]),
        ("finetune.recipe.epochs", INF, ["finetune.recipe.epochs is inf", "a finite number > 0"]),
        ("finetune.recipe.epochs", 0, ["finetune.recipe.epochs is 0", "> 0"]),
        ("finetune.recipe.micro_batch_size", 0, ["finetune.recipe.micro_batch_size is 0", ">= 1"]),
        ("finetune.recipe.learning_rate", -5e-5, ["finetune.recipe.learning_rate is -5e-05", "> 0"]),
        (
            "finetune.recipe.learning_rate",
            "fast",
            ["finetune.recipe.learning_rate is 'fast'", "a finite number > 0"],
        ),
        (
            "finetune.recipe.warmup_proportion",
            -0.1,
            ["finetune.recipe.warmup_proportion is -0.1", "in [0, 1)"],
        ),
        ("finetune.recipe.optimizer", "sgd", ["finetune.recipe.optimizer is 'sgd'", "allowed: lamb, adamw"]),
        ("finetune.recipe.decay_power", -1, ["finetune.recipe.decay_power is -1", ">= 0"]),
        # a task's or SQuAD's changes to the recipe: each checked as the recipe's own field is
        ("squad.recipe.learning_rate", 0, ["squad.recipe.learning_rate is 0", "a finite number > 0"]),
        ("tasks.rte.recipe.seed", 2**32, ["tasks.rte.recipe.seed is 4294967296", "in [0, 4294967295]"]),
        (
            "tasks.rte.recipe.lerning_rate",
            1e-4,
            ["unknown key tasks.rte.recipe.lerning_rate", "did you mean learning_rate?"],
        ),
        (
            "tasks.rte.recipe",
            [1e-4],
            ["tasks.rte.recipe must be a mapping (possibly empty: {}), not [0.0001]"],
        ),
        ("predict.batch_size", 0, ["predict.batch_size is 0", ">= 1"]),
        ("predict.n_best_size", 0, ["predict.n_best_size is 0", ">= 1"]),
        ("predict.max_answer_length", 0, ["predict.max_answer_length is 0", ">= 1"]),
        ("predict.null_score_diff_threshold", NAN, ["null_score_diff_threshold is nan", "a finite number"]),
        ("examples.masked_lm_prob", 1.5, ["examples.masked_lm_prob is 1.5", "in (0, 1)"]),
        ("examples.masked_lm_prob", 0, ["examples.masked_lm_prob is 0", "in (0, 1)"]),
        ("examples.short_seq_prob", -0.1, ["examples.short_seq_prob is -0.1", "in [0, 1]"]),
        ("examples.dupe_factor", 0, ["examples.dupe_factor is 0", ">= 1"]),
        ("examples.phase2.max_seq_length", 4, ["examples.phase2.max_seq_length is 4", ">= 8"]),
        ("examples.phase1.max_predictions_per_seq", 0, ["max_predictions_per_seq is 0", ">= 1"]),
        (
            "examples.phase1.max_predictions_per_seq",
            200,
            ["is 200", "at most examples.phase1.max_seq_length"],
        ),
        ("shard.num_train_shards", 0, ["shard.num_train_shards is 0", ">= 1"]),
        ("shard.num_test_shards", -1, ["shard.num_test_shards is -1", ">= 0 (0 = no test split)"]),
        ("shard.test_fraction", 1, ["shard.test_fraction is 1", "in [0, 1)"]),
        ("shard.min_sentences", 0, ["shard.min_sentences is 0", ">= 1"]),
        ("vocab.vocab_size", 50, ["vocab.vocab_size is 50", ">= 100"]),
        ("vocab.min_frequency", 0, ["vocab.min_frequency is 0", ">= 1"]),
        ("mixing.weights.wikipedia", -1.0, ["mixing.weights.wikipedia is -1.0", ">= 0"]),
        ("mixing.weights", {"wikipedia": 0, "bookcorpus": 0}, ["leave out every corpus"]),
        ("mixing.weights", {"books": 1.0}, ["mixing.weights.books names no corpus"]),
        ("mixing.num_output_shards", 0, ["mixing.num_output_shards is 0", ">= 1"]),
        ("distributed.nproc_per_node", 0, ["distributed.nproc_per_node is 0", ">= 1"]),
        ("distributed.nnodes", 0, ["distributed.nnodes is 0", ">= 1"]),
        (
            "distributed.threads_per_rank",
            0,
            ["distributed.threads_per_rank is 0; it must be auto or an integer >= 1"],
        ),
        (
            "distributed.threads_per_rank",
            "all",
            ["distributed.threads_per_rank is 'all'; it must be auto or"],
        ),
        ("distributed.threads_per_rank", True, ["distributed.threads_per_rank is true; it must be auto or"]),
        ("distributed.threads_per_rank", 2.5, ["distributed.threads_per_rank is 2.5; it must be auto or"]),
        ("benchmark.batch_size", 0, ["benchmark.batch_size is 0", ">= 1"]),
        ("benchmark.steps", 0, ["benchmark.steps is 0", ">= 1"]),
        ("benchmark.warmup_steps", -1, ["benchmark.warmup_steps is -1", ">= 0"]),
        ("benchmark.dev_windows", -1, ["benchmark.dev_windows is -1", "(0 = no dev-set timing)"]),
        ("squad.doc_stride", 0, ["squad.doc_stride is 0", ">= 1"]),
        ("squad.doc_stride", 192, ["squad.doc_stride is 192", "less than squad.max_seq_length (192)"]),
        ("squad.max_query_length", 189, ["squad.max_query_length is 189", "at most 188"]),
        # YAML 1.1 booleans where text is meant
        (
            "pretrain.precision",
            False,
            ["pretrain.precision is false", BOOLEAN_TRAP, '"fp32", "bf16" or "fp16"'],
        ),
        ("finetune.precision", True, ["finetune.precision is true", BOOLEAN_TRAP]),
        ("distributed.backend", False, ["distributed.backend is false", BOOLEAN_TRAP, '"nccl"']),
        ("finetune.init", False, ["finetune.init is false", BOOLEAN_TRAP, "quote"]),
        ("vocab.checksum", False, ["vocab.checksum is false", BOOLEAN_TRAP]),
        ("pretrain.compile", "yes", ["pretrain.compile must be true or false, not 'yes'"]),
        # choices
        ("finetune.precision", "fp8", ["finetune.precision is 'fp8'; allowed: fp32, bf16, fp16"]),
        ("mixing.mode", "blend", ["mixing.mode is 'blend'; allowed: intra, inter"]),
        ("squad.run", [1.1], ["squad.run[0] is 1.1; allowed: v1.1, v2.0"]),
        ("squad.run", "v1.1", ["squad.run must be a list, not 'v1.1'"]),
        (
            "squad.run",
            ["v1.1", "v2.0"],
            ["squad.run is ['v1.1', 'v2.0']; it names one SQuAD version", "[]: no SQuAD"],
        ),
        (
            "squad.sources",
            {"v3": {"train": "a", "dev": "b"}},
            ["squad.sources key is 'v3'; allowed: v1.1, v2.0"],
        ),
        (
            "squad.sources",
            {"v2.0": {"train": "a", "dev": "b"}},
            ["squad.sources has no entry for v1.1 (squad.run)"],
        ),
        ("model.size", "huge", ["model.size is 'huge'; allowed: tiny, mini, base, large"]),
        (
            "finetune.init",
            "bert-huge",
            [
                "finetune.init is 'bert-huge'; allowed: random, a phase of pretrain.phases (phase1, phase2)",
                "add it under weights",
            ],
        ),
        ("finetune.init", "hf:nowhere", ["finetune.init is 'hf:nowhere'", "google-base-uncased"]),
        (
            "weights",
            {"random": "https://example.org/bert"},
            ["weights.random: a weights name", "not random or phase1 or phase2"],
        ),
        ("weights", {"my bert": "https://example.org/bert"}, ["weights.my bert: a weights name is a folder"]),
        ("corpora", {}, ["corpora is empty"]),
        ("corpora.wikipedia.kind", "pdf", ["corpora.wikipedia.kind is 'pdf'; allowed: wikipedia, text"]),
        ("vocab.source", "books", ["vocab.source is 'books'; allowed: train, google, file:<path>"]),
        ("vocab.source", "file:missing.txt", ["vocab.source: missing.txt does not exist"]),
        ("vocab.url", None, ["vocab.url must be a string, not null"]),
        # keys that are not in the schema
        ("shard.colour", "blue", ["unknown key shard.colour", "shard takes: num_train_shards"]),
        ("finetune.recipe.epoch", 2, ["unknown key finetune.recipe.epoch; did you mean epochs?"]),
        ("seeds", 1, ["unknown key seeds; did you mean seed?"]),
        ("pretrain.phase1.init_optimizer_from_phase1", True, ["unknown key pretrain.phase1.init_optimizer_"]),
        # keys written once for every phase (Given): where they are, when written in a phase
        (
            "pretrain.phase1.optimizer",
            "adamw",
            [
                "unknown key pretrain.phase1.optimizer; it is pretrain.optimizer, written once for all; pretrain.phase1 takes: "
            ],
        ),
        (
            "examples.phase2.masking",
            "dynamic",
            ["unknown key examples.phase2.masking; it is examples.masking, written once for all"],
        ),
        ("pretrain.optimizer", "sgd", ["pretrain.optimizer is 'sgd'; allowed: lamb, adamw"]),
        (
            "pretrain.grad_clip",
            -1,
            ["pretrain.grad_clip is -1; it must be a finite number >= 0 (0 = no clipping)"],
        ),
        ("seed", -1, ["params.yaml: seed is -1; it must be an integer in [0, 4294967295]"]),
        # files and lists
        ("corpora.wikipedia.sources", ["missing/dump.xml.bz2"], ["missing/dump.xml.bz2 does not exist"]),
        ("corpora.wikipedia.sources", [], ["corpora.wikipedia.sources is empty"]),
        (
            "corpora.wikipedia.checksums",
            [None, None],
            ["corpora.wikipedia.checksums must be empty or have one"],
        ),
        ("corpora.wikipedia.sources", "params.yaml", ["corpora.wikipedia.sources must be a list"]),
        ("finetune", [1, 2], ["finetune must be a mapping"]),
    ],
)
def test_bad_values_are_rejected_in_one_line_naming_them(project, key, value, words):
    message = rejection(project, {key: value})
    for word in words:
        assert word in message
    assert message.startswith("params.yaml: ") and "\n" not in message


def leaf_and_section_paths(node: dict, path: tuple = ()):
    """Every key of params.yaml that the schema names, as a tuple of keys."""
    for key, value in node.items():
        if path not in NAMED_ENTRIES:
            yield (*path, key)
        if isinstance(value, dict):
            yield from leaf_and_section_paths(value, (*path, key))


def test_deleting_any_key_is_one_line_naming_it(project):
    paths = list(leaf_and_section_paths(repo_params()))
    assert ("finetune", "recipe", "epochs") in paths and ("squad", "sources", "v1.1", "train") in paths
    assert len(paths) > 100
    for path in paths:
        params = repo_params()
        *parents, last = path
        node = params
        for key in parents:
            node = node[key]
        del node[last]
        (project / "params.yaml").write_text(yaml.safe_dump(params))
        if parents[-1:] == ["recipe"] and parents != ["finetune", "recipe"]:
            # a change to finetune.recipe taken back: the recipe's own value again
            assert getattr(load_params().recipe(parents[-2]), last) == params["finetune"]["recipe"][last]
            continue
        with pytest.raises(UserError) as error:
            load_params()
        assert str(error.value) == f"params.yaml: {'.'.join(path)} is missing; {MISSING_HINT}"


def test_several_cross_field_problems_are_all_named(project):
    message = rejection(project, {"squad.doc_stride": 500, "finetune.init": "bert-huge"})
    assert "squad.doc_stride is 500" in message and "finetune.init is 'bert-huge'" in message


def test_google_vocabulary_needs_its_url(project):
    message = rejection(project, {"vocab.source": "google", "vocab.url": ""})
    assert message == "params.yaml: vocab.url is empty; vocab.source google downloads vocab.txt from it"


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"pretrain.phases.phase1": "google-base-uncased"}, "pretrain.phases starts from google-base-uncased (released weights) but vocab.source is train"),
        ({"vocab.source": "weights"}, "vocab.source is weights but pretrain.phases starts from random"),
        ({"pretrain.phases.phase1": "bert-huge", "vocab.source": "weights"}, "pretrain.phases.phase1 is 'bert-huge'; the first phase starts from random (model.size) or a key of weights"),
    ],
)  # fmt: skip
def test_the_vocabulary_follows_the_pretraining_weights(project, changes, words):
    message = rejection(project, changes)
    assert words in message and "\n" not in message
    write_params(project, {"pretrain.phases.phase1": "google-base-uncased", "vocab.source": "weights"})
    assert load_params().pretrain_start == "google-base-uncased"


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"pretrain.phases": {}}, "pretrain.phases names no phase; it runs phase1, phase2 or both, in that order"),
        ({"pretrain.phases": {"phase3": "random"}}, "pretrain.phases names phase3; it runs"),
        ({"pretrain.phases.phase2": "random"}, "pretrain.phases.phase2 is 'random'; a later phase starts from the one before it: phase1"),
        ({"pretrain.phases": {"phase1": "phase2"}, "finetune.init": "phase1"}, "pretrain.phases.phase1 is 'phase2'; the first phase starts from random"),
        ({"pretrain.phases": {"phase1": "random"}}, "finetune.init is 'phase2'; allowed: random, a phase of pretrain.phases (phase1), or a key of weights ("),
        ({"pretrain.phases": {"phase1": "random"}}, "; pretrain.phases does not run phase2: start from phase1, or add phase2 to it"),
        ({"pretrain.phases": {"phase2": "random"}, "pretrain.phase2.init_optimizer_from_phase1": True},
         "pretrain.phase2.init_optimizer_from_phase1 is on but pretrain.phases does not run phase2 from phase1; turn it off"),
    ],
)  # fmt: skip
def test_the_phases_run_in_order_each_from_the_one_before(project, changes, words):
    message = rejection(project, changes)
    assert words in message and "\n" not in message


def test_the_phases_run_in_the_order_they_are_written(project):
    params = repo_params()
    params["pretrain"]["phases"] = {"phase2": "random", "phase1": "phase2"}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(UserError) as error:
        load_params()
    assert str(error.value).startswith(
        "params.yaml: pretrain.phases names phase2, phase1; it runs phase1, phase2 or both"
    )


@pytest.mark.parametrize("phases", [{"phase1": "random"}, {"phase2": "random"}])
def test_one_phase_is_a_pretraining_run(project, phases):
    write_params(project, {"pretrain.phases": phases, "finetune.init": next(iter(phases))})
    assert load_params().pretrain.phases == phases


def test_invalid_params_fail_the_stage_before_any_work(project):
    write_params(project, {"model.size": "huge", "seed": -1})
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from bert.errors import run_main; from stages.common.params import load_params; run_main(load_params)",
        ],
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 1
    assert result.stderr == "error: params.yaml: seed is -1; it must be an integer in [0, 4294967295]\n"


def test_an_empty_or_broken_file_is_one_line(project):
    (project / "params.yaml").write_text("")
    with pytest.raises(
        UserError, match=r"^params.yaml: expected the params' sections \(seed:, corpora:, ...\), not null$"
    ):
        load_params()
    (project / "params.yaml").write_text("seed: [1\n")
    with pytest.raises(UserError) as error:
        load_params()
    assert str(error.value).startswith("params.yaml: not valid YAML at line 2, column 1: ")
    assert "\n" not in str(error.value)
    # a tag its constructor cannot read raised the constructor's own ValueError (a traceback)
    (project / "params.yaml").write_text("seed: !!int x\n")
    with pytest.raises(
        UserError, match=r"^params.yaml: not valid YAML at line 1, column 7: 'x' is not a valid !!int$"
    ):
        load_params()


@pytest.mark.parametrize(
    ("of", "changes", "words"),
    [
        ("phase1", {"distributed.nproc_per_node": 3}, "pretrain.phase1.global_batch_size 32 is not a multiple "
         "of pretrain.phase1.micro_batch_size 32 x world size 3 (distributed.nproc_per_node x nnodes)"),
        ("rte", {"tasks.rte.recipe.micro_batch_size": 5}, "finetune.recipe with tasks.rte.recipe: global_batch_size "
         "16 is not a multiple of micro_batch_size 5 x world size 1 (distributed.nproc_per_node x nnodes)"),
        ("squad", {"finetune.recipe.micro_batch_size": 4, "distributed.nnodes": 8}, "finetune.recipe with "
         "squad.recipe: global_batch_size 16 is not a multiple of micro_batch_size 4 x world size 8 (distributed.nproc_per_node x nnodes)"),
    ],
)  # fmt: skip
def test_a_global_batch_that_does_not_split_over_the_processes_is_one_line(project, of, changes, words):
    write_params(project, changes)
    params = load_params()  # the other stages' batches may still be fine
    with pytest.raises(UserError) as error:
        params.check_global_batch(of)
    assert str(error.value) == f"params.yaml: {words}; change one of them so that it divides exactly"
    write_params(project, {})
    load_params().check_global_batch(of)


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"tasks.run": {"rte": "mnli", "mnli": "finetune.init"}},
            "tasks.run.rte is 'mnli'; allowed: finetune.init, or a task listed before rte in tasks.run (none): list mnli before rte",
        ),
        (
            {"tasks.run": {"mnli": "finetune.init", "rte": "qnli"}},
            "tasks.run.rte is 'qnli'; allowed: finetune.init, or a task listed before rte in tasks.run (mnli)",
        ),
        (
            {"tasks.run": {"rte": "rte"}},
            "tasks.run.rte is 'rte'; allowed: finetune.init, or a task listed before rte in tasks.run (none)",
        ),
        ({"tasks.rte.seeds": [1, 2, 1]}, "tasks.rte.seeds names a seed twice: 1, 2, 1"),
        (
            {"corpora.bookcorpus.kind": "task"},
            "corpora.bookcorpus.columns: name the columns of the task's text (e.g. [sentence1, sentence2]; SQuAD: [context])",
        ),
        (
            {"corpora.bookcorpus.columns": ["text"]},
            "corpora.bookcorpus.columns: a corpus of kind text has no columns; leave it empty ([])",
        ),
    ],
    ids=["listed-after", "not-run", "itself", "seed-twice", "task-corpus-no-columns", "text-corpus-columns"],
)
def test_a_tasks_init_and_seeds_and_a_task_corpus_are_checked_in_one_line(project, changes, message):
    assert rejection(project, changes) == f"params.yaml: {message}"


def test_tasks_run_names_known_tasks_each_with_its_start(project):
    assert rejection(project, {"tasks.run": {"glue": "finetune.init"}}) == (
        "params.yaml: tasks.run key is 'glue'; allowed: swag, cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte"
    )
    write_params(project, {"tasks.run": {"mnli": "finetune.init", "rte": "mnli", "mrpc": "mnli"}})
    assert load_params().tasks.run == {"mnli": "finetune.init", "rte": "mnli", "mrpc": "mnli"}


def test_squad_may_be_left_out(project):
    """squad.run: [] is a pipeline of tasks alone; the SQuAD stages, which exist only with a version,
    say so in one line if run by hand."""
    write_params(project, {"squad.run": []})
    params = load_params()
    assert params.squad.run == []
    with pytest.raises(
        UserError, match=r"^params.yaml: squad.run is \[\]: SQuAD is not run; set squad.run: \[v1.1\]"
    ):
        _ = params.squad.version


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("pretrain.init", "random", "unknown key pretrain.init; where pretraining starts is now pretrain.phases' first entry"),
        ("tasks.rte.init", "mnli", "unknown key tasks.rte.init; a task's start is now its entry in tasks.run (tasks.run.rte: "),
        ("tasks.run", ["rte"], "tasks.run must be a mapping, not ['rte']; tasks.run maps each task to its start"),
        ("squad.version", "v2.0", "unknown key squad.version; the SQuAD version run is now squad.run's entry: [v1.1], [v2.0], or []"),
    ],
)  # fmt: skip
def test_a_params_file_of_before_says_where_the_param_went(project, key, value, message):
    write_params(project, {key: value})
    with pytest.raises(UserError) as error:
        load_params()
    assert str(error.value).startswith(f"params.yaml: {message}"), str(error.value)


def literal_params(kind, prefix: str = "", elsewhere: dict = {}):  # noqa: B006 (read only)
    """(dotted name, allowed words) of every param of the schema whose value is one of a few words;
    a field that params.yaml writes once elsewhere (Given) under that param's name."""
    hints = typing.get_type_hints(kind, include_extras=True)
    for field in dataclasses.fields(kind):
        name, hint = elsewhere.get(field.name, f"{prefix}{field.name}"), hints[field.name]
        given = {}
        if typing.get_origin(hint) is Annotated and isinstance(typing.get_args(hint)[1], Given):
            hint, given = typing.get_args(hint)[0], typing.get_args(hint)[1].params
        options = (
            typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        )
        words = [
            word
            for option in options
            if typing.get_origin(option) is Literal
            for word in typing.get_args(option)
        ]
        if words:
            yield name, words
        elif dataclasses.is_dataclass(hint):
            yield from literal_params(hint, f"{name}.", given)


def test_every_word_a_param_takes_survives_dvc_exp_run_set_param(project):
    """`dvc exp run -S key=value` writes the value bare (DVC's own override writer, used here on a
    copy): each word the schema allows must read back as itself, not as YAML's false for `off`."""
    from dvc.utils.hydra import apply_overrides

    params = dict(literal_params(Params))
    assert len(params) > 10 and params["clean.decontaminate"] == ["none", "report", "remove"]
    assert params["pretrain.optimizer"] == ["lamb", "adamw"] and params["examples.masking"] == [
        "static",
        "dynamic",
    ]
    assert (
        "pretrain.phase1.optimizer" not in params and "examples.phase2.masking" not in params
    )  # written once
    write_params(project)
    for turn in range(max(map(len, params.values()))):  # each param's next word, all at once
        settings = {dotted: words[turn] for dotted, words in params.items() if turn < len(words)}
        apply_overrides("params.yaml", [f"{dotted}={word}" for dotted, word in settings.items()])
        written = yaml.safe_load(Path("params.yaml").read_text(encoding="utf-8"))
        for dotted, word in settings.items():
            value = written
            for key in dotted.split("."):
                value = value[key]
            assert value == word, f"-S {dotted}={word} reads back as {value!r}"
    write_params(project)
    apply_overrides("params.yaml", ["clean.decontaminate=none"])
    assert load_params().clean.decontaminate == "none"
    apply_overrides("params.yaml", ["clean.decontaminate=off"])  # as the docs of before said
    with pytest.raises(UserError, match="clean.decontaminate is false: the value off is now spelled none"):
        load_params()


@pytest.fixture(scope="module")
def dvc_project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("dvc-first") / "project")


OPERATIONS = (REPO / "docs/operations.md").read_text(encoding="utf-8")


SAME_ITEM = "Same item(s) are defined as both a dependency and an output in stage"
NO_SUCH_FOLDER = "failed to reproduce 'clean': [Errno 2] No such file or directory: "


@pytest.mark.parametrize(
    "changes, target, dvc_says, we_say",
    [
        ({"pretrain.phases": {"phase1": "phase2", "phase2": "phase1"}}, [],
         (f"{SAME_ITEM}s: pretrain@phase",),  # the two in either order
         "pretrain.phases.phase1 is 'phase2'; the first phase starts from random (model.size) or a key of weights"),
        ({"pretrain.phases": {"phase1": "phase1", "phase2": "phase1"}}, [], (f"{SAME_ITEM}: pretrain@phase1",),
         "pretrain.phases.phase1 is 'phase1'; the first phase starts from random"),
        ({"tasks.run": {"rte": "rte"}}, [], (f"{SAME_ITEM}: finetune_task@rte",),
         "tasks.run.rte is 'rte'; allowed: finetune.init, or a task listed before rte in tasks.run"),
        ({"pretrain.phases": ["phase1", "phase2"]}, [],
         ("failed to parse 'stages.examples@phase1.cmd' in 'dvc.yaml': Could not find 'key'",),
         "pretrain.phases must be a mapping, not ['phase1', 'phase2']"),
        ({"clean.decontaminate": "scrub"}, ["--single-item", "clean"], (NO_SUCH_FOLDER, "/data/decontaminate/scrub'"),
         "clean.decontaminate is 'scrub'; allowed: none, report, remove"),
        ({"clean.decontaminate": False}, ["--single-item", "clean"], (NO_SUCH_FOLDER, "/data/decontaminate/false'"),
         "clean.decontaminate is false: the value off is now spelled none"),
    ],
    ids=["phases-cycle", "phase-from-itself", "task-from-itself", "phases-a-list", "decontaminate-unknown",
         "decontaminate-off"],
)  # fmt: skip
def test_where_dvc_speaks_first_the_docs_give_its_message_and_stages_params_the_fix(
    dvc_project, changes, target, dvc_says, we_say
):
    """Values that leave dvc.yaml malformed: DVC stops with its own message before any stage runs;
    docs/operations.md's table holds that message, and `python -m stages.common.params` prints the
    project's line."""
    write_params(dvc_project, changes)
    dvc = subprocess.run(
        [BIN / "dvc", "repro", "--dry", *target], cwd=dvc_project, capture_output=True, text=True
    )
    assert dvc.returncode != 0, dvc.stdout[-2000:]
    for words in dvc_says:
        assert words in dvc.stderr and words in OPERATIONS, (words, dvc.stderr[-2000:])
    check = run_stage(dvc_project, "stages.common.params")
    assert check.returncode == 1 and check.stderr.strip().startswith(f"error: params.yaml: {we_say}"), (
        check.stderr
    )
