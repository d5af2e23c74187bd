"""Where the pipeline keeps its files: every path a stage, `scripts/summary.py` or a message names
comes from here. dvc.yaml names the same paths for DVC (tests/test_layout.py holds the two equal),
and the library (bert/) takes paths as arguments and knows none of them.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from bert.errors import UserError

# The pretraining phases, in the order they run: the one list of them. Each has its examples.<phase>
# and pretrain.<phase> in params.yaml (the schema takes one block of each per phase), its stages
# examples@<phase> and pretrain@<phase>, and its model data/weights/<phase>; pretrain.phases runs
# one or both.
PHASES = ("phase1", "phase2")
SQUAD = "squad"  # SQuAD's training run, beside the phases and the tasks (bert.tasks.catalogue.TASKS)


@dataclass(frozen=True)
class RunKind:
    """A kind of training run (a pretraining phase, SQuAD, a task) and what differs by it, each a
    pattern of the run's name `{run}`: `run_kind(run)` says which a run is."""

    folder: str  # below data/models, data/checkpoints and the logs
    stage: str  # the training stage's name, which names its curves and final figures
    recipe: str  # the params block its recipe is, or changes finetune.recipe with
    run_settings: str  # the params block its run settings are

    def of(self, run: str, pattern: str) -> str:
        return getattr(self, pattern).format(run=run)


PHASE = RunKind(folder="{run}", stage="pretrain_{run}", recipe="pretrain.{run}", run_settings="pretrain")
SQUAD_RUN = RunKind(folder="{run}", stage="finetune_squad", recipe="squad.recipe", run_settings="finetune")
TASK = RunKind(
    folder="tasks/{run}", stage="finetune_task/{run}", recipe="tasks.{run}.recipe", run_settings="finetune"
)


def run_kind(run: str) -> RunKind:
    """phase1 and phase2 are phases, squad is SQuAD, any other run a task."""
    return PHASE if run in PHASES else SQUAD_RUN if run == SQUAD else TASK


DATA = Path("data")
SAMPLE = DATA / "sample"  # the bundled sample world (committed), the demo's sources
VOCAB_DIR = DATA / "vocab"
VOCAB = VOCAB_DIR / "vocab.txt"  # a WordPiece run's; vocab_file() is the one of any run
SQUAD_DIR = DATA / "squad"
SQUAD_TRAIN = SQUAD_DIR / "train.json"
SQUAD_DEV = SQUAD_DIR / "dev.json"
SQUAD_PREDICTIONS = DATA / "predictions"
SOURCES = DATA / "sources"  # manifests of the local sources params name, for DVC to hash (stages/sources.py)
SQUAD_SOURCES = SOURCES / "squad.json"
# The sources' file digests by file identity, so an unchanged file is not read again (bert.download.manifest):
# machine-local state, neither a DVC output nor in git (.gitignore).
SOURCE_HASHES = DATA / "source_hashes.json"
CLEAN_DIR = DATA / "clean"  # the cleaned document tables, one folder per corpus (stage clean)
# The clean stage's dep follows clean.decontaminate: data/decontaminate/<mode>. Under `remove` that is
# the evaluation texts (stage eval_texts), so pretraining depends on the evaluation sets; `off` and
# `report` are committed folders holding a README, so it does not.
DECONTAMINATE = DATA / "decontaminate"
EVAL_TEXTS_DIR = DECONTAMINATE / "remove"
EVAL_TEXTS = EVAL_TEXTS_DIR / "eval_texts.parquet"
METRICS = Path("metrics")
LIVE = Path("dvclive")
# Where the pipeline writes: no local source may lie in one of them or hold one (a dependency on a
# pipeline output is one DVC's graph cannot see), except under SAMPLE, which holds the bundled sources.
OUTPUT_ROOTS = (DATA, METRICS, LIVE)


def raw(corpus: str) -> Path:
    return DATA / "raw" / corpus


def corpus_sources(corpus: str) -> Path:
    return SOURCES / "corpora" / f"{corpus}.json"


def task_sources(task: str) -> Path:
    return SOURCES / "tasks" / f"{task}.json"


def weights_sources(name: str) -> Path:
    return SOURCES / "weights" / f"{name}.json"


def documents(corpus: str) -> Path:
    return DATA / "documents" / corpus


def clean(corpus: str) -> Path:
    return CLEAN_DIR / corpus


def shards(corpus: str | None = None) -> Path:
    """One corpus's sentence shards, or (None) the folder of every corpus's."""
    return DATA / "shards" if corpus is None else DATA / "shards" / corpus


def examples(phase: str) -> Path:
    return DATA / "examples" / phase


def model(run: str) -> Path:
    """A fine-tuned model: squad's, or a task's (data/models/tasks/<task>). A phase's model is
    weights(phase): a folder later phases and fine-tuning start from."""
    return DATA / "models" / _run_folder(run)


def weights(name: str) -> Path:
    """A Hugging Face folder to start from: a phase's model (pretrain@<phase>), random
    (init_random), or a key of `weights` (download_weights@<name>)."""
    return DATA / "weights" / name


def task_data(task: str) -> Path:
    return DATA / "tasks" / task


def task_predictions(task: str) -> Path:
    return DATA / "task_predictions" / task


def checkpoints(run: str) -> Path:
    """A training run's checkpoints (phase1, phase2, squad, or a task's): outside DVC's outputs,
    so that a killed stage resumes from them."""
    return DATA / "checkpoints" / _run_folder(run)


def logs(run: str) -> Path:
    """The output of each rank of a training run on several processes (rank<R>.log, torchrun's
    torchrun-node<N>.log): under BERT_LOG_DIR when set (an execution setting, like the rendezvous:
    not a param), else data/logs/. Not a DVC output, git-ignored; the next run overwrites them. The
    stage checks the folder before any work: never inside OUTPUT_FOLDERS (bert.distributed.launch.launch)."""
    return Path(os.environ.get("BERT_LOG_DIR") or DATA / "logs") / _run_folder(run)


# The folders that hold every output dvc.yaml declares (tests/test_layout.py holds the two equal):
# DVC deletes an output before its stage runs and the stage replaces it whole, so nothing else may
# be written in them; the training stages check that no rank logs go there (bert.distributed.launch).
OUTPUT_FOLDERS = (
    raw(""), documents(""), CLEAN_DIR, EVAL_TEXTS_DIR, shards(), VOCAB_DIR, examples(""), DATA / "models", weights(""), SQUAD_DIR,
    SQUAD_PREDICTIONS, task_data(""), task_predictions(""), SOURCES, METRICS, LIVE,
)  # fmt: skip


def live(run: str) -> Path:
    """A training run's DVCLive curves, under its stage's name: dvclive/pretrain_phase1,
    dvclive/finetune_squad, dvclive/finetune_task/<task>."""
    return LIVE / _stage_folder(run)


def training_metrics(run: str) -> Path:
    """A training run's final figures: metrics/pretrain_phase1.json, finetune_squad.json,
    finetune_task/<task>.json."""
    return METRICS / f"{_stage_folder(run)}.json"


def metrics(name: str) -> Path:
    """metrics/<name>.json of a stage that is not training: squad, benchmark, glue."""
    return METRICS / f"{name}.json"


def documents_metrics(corpus: str) -> Path:
    return METRICS / f"documents_{corpus}.json"


def shard_metrics(corpus: str) -> Path:
    return METRICS / f"shard_{corpus}.json"


CLEAN_METRICS = METRICS / "clean.json"
CLEAN_SAMPLES = METRICS / "clean_removed.txt"  # first lines of removed documents beside the kept ones
CONTAMINATION_METRICS = METRICS / "contamination.json"


def seed_folder(seed: int) -> str:
    """The folder of one seed's run of a task with several (tasks.<task>.seeds), below its model,
    predictions, checkpoints and curves."""
    return f"seed-{seed}"


# Beside a task's model and predictions with several seeds: the seeds, in order (the first one's
# model and predictions are the task's own, the others' in seed_folder(seed)).
SEEDS_FILE = "seeds.json"


def task_metrics(task: str) -> Path:
    """A task's official measures (evaluate_task@<task>)."""
    return METRICS / "tasks" / f"{task}.json"


def _run_folder(run: str) -> str:
    """Where a training run's folders sit below data/models, data/checkpoints and the logs: a
    phase and squad by their names, a task's under tasks/."""
    return run_kind(run).of(run, "folder")


def _stage_folder(run: str) -> str:
    """The training stage's name, which names its curves and figures."""
    return run_kind(run).of(run, "stage")


# The starting folders the pipeline builds itself (data/weights/<name>), each with its stage:
# fresh weights, and each phase's model; any other is a key of params.yaml's weights.
BUILT_WEIGHTS = {"random": "init_random", **{phase: f"pretrain@{phase}" for phase in PHASES}}


def weights_stage(name: str) -> str:
    """The stage that writes data/weights/<name>."""
    return BUILT_WEIGHTS.get(name, f"download_weights@{name}")


def tokenizer_file(directory: Path) -> Path:
    """The file that holds a folder's vocabulary: vocab.txt (BERT's WordPiece), else tokenizer.json
    (any other tokenizer), as bert.text.tokenization.load_tokenizer_from_dir reads a folder."""
    vocab = directory / "vocab.txt"
    return (
        vocab
        if vocab.is_file() or not (directory / "tokenizer.json").is_file()
        else directory / "tokenizer.json"
    )


def vocab_file() -> Path:
    """The vocab stage's tokenizer: data/vocab/vocab.txt (WordPiece), else data/vocab/tokenizer.json."""
    return tokenizer_file(VOCAB_DIR)


def init_directory(init: str) -> Path:
    """The Hugging Face folder finetune.init names, as its stage left it."""
    directory = weights(init)
    stage = weights_stage(init)
    if not tokenizer_file(directory).is_file() or not (directory / "config.json").is_file():
        raise UserError(
            f"{directory}: no config.json + vocab.txt (or tokenizer.json) for finetune.init={init}; "
            f"run `dvc repro {stage}`"
        )
    return directory
