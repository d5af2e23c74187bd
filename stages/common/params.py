"""params.yaml, read through one typed schema and checked before any stage does work.

Every stage calls `load_params()`. params.yaml is the one source of values: the schema has no
defaults, so a key deleted from the file is an error naming it, never a silent switch to another
value. Each number carries its allowed range (`Range`, in the field's type), so a wrong value fails at
once with a message naming the param, the value and what it may be, instead of hours into a run.
Numbers are read as numbers even when a tool wrote them as strings: YAML 1.1 loaders read `6e-05`
(which `dvc exp run --set-param` writes) as a string.

`python -m stages.common.params` checks params.yaml alone, without DVC: where a value leaves dvc.yaml
malformed (a cycle of phases, a list for a mapping, an unknown clean.decontaminate), DVC's own
error comes before any stage runs, and this prints the project's line for it.
"""

import dataclasses
import difflib
import math
import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml

from bert.compute import SCHEDULERS, Compute, is_scheduler_address, scheduler_address_problem
from bert.errors import UserError, run_main
from bert.inputs import read_yaml
from bert.model.presets import SIZES, config_file, family_and_positions
from bert.ranges import Count, LearningRate, Probability, Range, Seed, Share, WeightDecay
from bert.training.recipe import FineTuningRecipe, Recipe, RunSettings, schedule_problem

PARAMS_FILE = Path("params.yaml")
# Names that become folder and stage names (data/raw/<corpus>, download_weights@<name>).
NAME = re.compile(r"[A-Za-z0-9_-]+")
# A task's init when it starts where SQuAD does, from finetune.init's folder.
TASK_INIT_DEFAULT = "finetune.init"
# The pretraining phases (each with its pretrain.<phase> and examples.<phase>), in the order they run.
PHASES = ("phase1", "phase2")
# Starting folders the pipeline builds itself (data/weights/<name>): fresh weights, and each phase's model.
BUILT_INITS = ("random", *PHASES)
# Params of earlier params.yaml files that moved or changed shape, and where their meaning went.
MOVED = {
    "pretrain.init": "where pretraining starts is now pretrain.phases' first entry (phase1: random, or a key of weights)",
    "tasks.<task>.init": "a task's start is now its entry in tasks.run (tasks.run.<task>: finetune.init, or an earlier task)",
    "tasks.run": "tasks.run maps each task to its start ({swag: finetune.init, rte: mnli, ...})",
    "squad.version": "the SQuAD version run is now squad.run's entry: [v1.1], [v2.0], or [] for no SQuAD",
}
YAML_BOOLEAN_TRAP = "YAML reads an unquoted no/off/yes/on as a boolean"
# Values of earlier params.yaml files now spelled otherwise, as {param: (old, new)}: `off` became
# `none`, which `dvc exp run -S` writes as it is (it writes off bare, and YAML reads that as false).
RESPELLED = {"clean.decontaminate": ("off", "none")}


@dataclass
class Corpus:
    # wikipedia: MediaWiki XML dumps; text: .txt files (one document each) or Parquet with `text`;
    # task: a fine-tuning task's files (GLUE .tsv, SWAG .csv, SQuAD .json), its text columns
    kind: Literal["wikipedia", "text", "task"]
    sources: list[str]
    checksums: list[str | None]  # empty: none checked; else one per source, null for "not checked"
    # kind task: the columns whose text makes the documents (a header's names; SQuAD: context,
    # question); empty for the other kinds, which have no columns to choose
    columns: list[str]


@dataclass
class Shard:
    num_train_shards: Count
    num_test_shards: Annotated[int, Range(low=0, meaning="0 = no test split")]
    test_fraction: Share
    min_sentences: Count
    punkt: Literal["auto", "pretrained", "train"]


@dataclass
class CleanNear:
    enabled: bool
    # Exact Jaccard similarity of two documents' word-shingle sets at or above which they are duplicates
    threshold: Annotated[float, Range(0, 1, low_open=True)]
    ngram: Count  # words per shingle
    num_perm: Annotated[int, Range(low=2)]  # MinHash values per document
    bands: Count  # LSH bands; must divide num_perm (rows per band = num_perm / bands)


@dataclass
class Clean:
    exact: bool  # remove documents whose normalised text equals an earlier one's
    near: CleanNear
    # off | report (stage contamination, off the pretraining path) | remove (pretraining depends on the evaluation sets)
    decontaminate: Literal["none", "report", "remove"]  # a folder name in dvc.yaml: data/decontaminate/<it>
    contamination_ngram: Count  # words per n-gram shared with an evaluation text (GPT-3: 13)
    # A line in at least this many documents is boilerplate, removed from all of them; 0 = off
    boilerplate_min_documents: Annotated[int, Range(low=0, meaning="0 = off, else at least 2")]


@dataclass
class Vocab:
    source: str  # train | google | file:<path> (vocab.txt or tokenizer.json) | weights (the tokenizer of the weights pretrain.phases starts from)
    kind: Literal[
        "wordpiece", "bpe"
    ]  # what source train trains: BERT's WordPiece or a byte-level BPE (tokenizer.json)
    url: str
    checksum: str | None  # null: not checked
    vocab_size: Annotated[int, Range(low=100)]
    min_frequency: Count
    lower_case: bool


@dataclass
class Mixing:
    mode: Literal["intra", "inter"]
    # One weight per corpus named in `corpora`; a corpus left out keeps its documents as they are (1.0).
    weights: dict[str, Annotated[float, Range(low=0, meaning="0 = left out")]]
    num_output_shards: Count


@dataclass
class PhaseExamples:
    max_seq_length: Annotated[int, Range(low=8)]
    max_predictions_per_seq: Count


@dataclass
class Examples:
    phase1: PhaseExamples
    phase2: PhaseExamples
    masking: Literal["static", "dynamic"]
    whole_word_mask: bool
    masked_lm_prob: Annotated[float, Range(0, 1, low_open=True, high_open=True)]
    short_seq_prob: Probability
    dupe_factor: Count
    next_sentence: bool  # false: MLM-only instances of packed full sentences, no NSP labels or loss


@dataclass
class Model:
    size: str  # a preset name, or a Hugging Face config.json or the folder holding one


@dataclass
class PretrainPhase:
    max_steps: Count
    global_batch_size: Count  # sequences per optimizer step, over all GPUs and accumulation steps
    micro_batch_size: Count  # per GPU and forward pass; accumulation = global / (micro x GPUs)
    learning_rate: LearningRate
    warmup_proportion: Share
    weight_decay: WeightDecay
    schedule: Literal[
        "poly", "wsd"
    ]  # poly: decay after warm-up (pretrain.decay_power); wsd: warm-up, stable, decay
    decay_share: Annotated[
        float, Range(0, 1, low_open=True, meaning="wsd: the share of the steps that decay")
    ]
    decay_shape: Literal["linear", "cosine", "1-sqrt"]  # wsd: the decay's curve to 0


@dataclass
class PretrainPhase2(PretrainPhase):
    init_optimizer_from_phase1: bool  # phase 1 has no earlier optimizer to start from


@dataclass(frozen=True)
class Pretrain(RunSettings):
    """The phases' run settings (bert.training.recipe.RunSettings), and the recipe keys they share."""

    # The phases run, in order, each with the data/weights folder it starts from: the first from
    # random or a key of `weights`, the second from the first (Params.pretrain_start, _check).
    phases: dict[str, str]
    phase1: PretrainPhase
    phase2: PretrainPhase2
    optimizer: Literal["lamb", "adamw"]
    use_apex: bool
    grad_clip: Annotated[float, Range(low=0, meaning="0 = no clipping")]
    decay_power: Annotated[float, Range(low=0, meaning="1 = linear decay to 0, 0 = constant")]
    data_workers: Annotated[int, Range(low=0, meaning="0 = load in the training process")]


@dataclass
class Distributed:
    nproc_per_node: Count
    nnodes: Count
    backend: Literal["auto", "nccl", "gloo"]
    # The CPU threads each rank computes on: they change the order of float sums, so the numbers.
    # auto: this node's CPUs over its ranks with several, torch's default alone (OMP_NUM_THREADS
    # when set); N: N on any layout of the ranks (bert.distributed.launch.threads_per_rank).
    threads_per_rank: Literal["auto"] | Count
    # Where and how the ranks run (rendezvous endpoint, timeouts, restarts, logs) is not a param: it
    # changes no number, so it comes from the environment (bert.distributed.launch.Execution).


@dataclass(frozen=True)
class Override:
    """A mapping that replaces some keys of a dataclass (`of`): each given key is checked as that
    field is, an unknown key is an error; what it leaves out keeps the value it overrides."""

    of: type


RecipeOverride = Annotated[dict, Override(FineTuningRecipe)]


@dataclass
class SquadFiles:
    train: str
    dev: str


SquadVersion = Literal["v1.1", "v2.0"]


@dataclass
class Squad:
    # The SQuAD version fine-tuned and evaluated on, as a list so that dvc.yaml's SQuAD stages are a
    # `foreach` over it (DVC's templates have no conditionals): [v1.1], [v2.0], or [] for no SQuAD.
    run: list[SquadVersion]
    sources: dict[SquadVersion, SquadFiles]  # only the entry of the version run is needed
    max_seq_length: Annotated[int, Range(low=8)]
    doc_stride: Count
    max_query_length: Count
    recipe: RecipeOverride  # over finetune.recipe

    @property
    def version(self) -> SquadVersion:
        """The version run, for the SQuAD stages (which exist only when squad.run names one)."""
        if not self.run:
            raise UserError(
                "params.yaml: squad.run is []: SQuAD is not run; set squad.run: [v1.1] (or [v2.0])"
            )
        return self.run[0]


@dataclass(frozen=True)
class Finetune(RunSettings):
    """What SQuAD and every task share: where they start, how each run computes and records
    (bert.training.recipe.RunSettings), and the recipe that squad.recipe and tasks.<task>.recipe change."""

    init: str  # a phase of pretrain.phases | random | a key of `weights`
    recipe: FineTuningRecipe


@dataclass
class Splits:
    """The file of each split among a task's sources, by name (SWAG's dev split is val.csv)."""

    train: str
    dev: str


@dataclass
class MnliSplits:
    train: str
    dev_matched: str
    dev_mismatched: str


@dataclass
class TaskParams:
    """One SWAG or GLUE task: where its files come from, its length, and its recipe's overrides."""

    sources: list[str]  # the task's files, its folder, or a .zip of it (URLs or paths)
    checksums: list[str | None]  # empty: none checked; else one per source
    # Each split's file name among the sources; download_task@<task> finds them by these names and
    # keeps each under its published one (bert.tasks.data.with_source_files).
    splits: Splits
    max_seq_length: Annotated[int, Range(low=8)]
    recipe: RecipeOverride
    # Empty: one run, with the recipe's seed. Else one run per seed (the recipe's seed replaced):
    # evaluate_task reports each measure's median over them and its spread (docs/tasks.md).
    seeds: list[Seed]


@dataclass
class MnliParams(TaskParams):
    splits: MnliSplits  # two dev splits: matched and mismatched genres


TaskName = Literal["swag", "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte"]


@dataclass
class Tasks:
    # The tasks the pipeline fine-tunes on (stages finetune_task@<task>, ...), in order, each with
    # where it starts: finetune.init's folder, or the model of a task before it (rte: mnli), the head
    # kept when the labels are the same. dvc.yaml's dependency data/models/tasks/<start> is that
    # task's model, or the committed placeholder data/models/tasks/finetune.init.
    run: dict[TaskName, str]
    swag: TaskParams
    cola: TaskParams
    sst2: TaskParams
    mrpc: TaskParams
    stsb: TaskParams
    qqp: TaskParams
    mnli: MnliParams
    qnli: TaskParams
    rte: TaskParams


@dataclass
class Predict:
    batch_size: Count
    n_best_size: Count
    max_answer_length: Count
    null_score_diff_threshold: float  # any finite score margin; SQuAD v2 tunes it on dev, often negative


@dataclass
class Benchmark:
    batch_size: Count
    seq_length: Annotated[int, Range(low=8)]
    warmup_steps: Annotated[int, Range(low=0)]
    steps: Count
    # A seeded sample of dev windows timed as predict_squad runs them.
    dev_windows: Annotated[int, Range(low=0, meaning="0 = no dev-set timing")]
    # Sequences per pretraining step timed at the phase-1 and phase-2 shapes (examples.phase*).
    pretraining_batch_size: Annotated[int, Range(low=0, meaning="0 = no pretraining timing")]


@dataclass
class Params:
    corpora: dict[str, Corpus]
    follow_links: bool  # links in a local source folder may lead out of it (bert.source_tree)
    clean: Clean
    shard: Shard
    vocab: Vocab
    mixing: Mixing
    examples: Examples
    model: Model
    pretrain: Pretrain
    distributed: Distributed
    squad: Squad
    weights: dict[str, str]  # Hugging Face BERT folders (URL or local path) by name, for finetune.init
    finetune: Finetune
    tasks: Tasks
    predict: Predict
    benchmark: Benchmark
    seed: Seed
    compute: Compute  # where the data stages run their tasks (bert.compute, bert.parallel)

    @property
    def pretrain_start(self) -> str:
        """Where pretraining starts: the first phase's folder, random or a key of weights (what
        vocab.source: weights and download_weights read)."""
        return next(iter(self.pretrain.phases.values()))

    def recipe(self, of: str) -> Recipe:
        """The recipe of phase1, phase2, "squad" or a task, built once from params.yaml: a phase's
        from pretrain and pretrain.<phase> (its seed the top-level one); SQuAD's and a task's is
        finetune.recipe with squad.recipe's or tasks.<task>.recipe's changes."""
        if of in PHASES:
            phase: PretrainPhase = getattr(self.pretrain, of)
            return Recipe(
                optimizer=self.pretrain.optimizer,
                learning_rate=phase.learning_rate,
                warmup_proportion=phase.warmup_proportion,
                decay_power=self.pretrain.decay_power,
                schedule=phase.schedule,
                decay_share=phase.decay_share,
                decay_shape=phase.decay_shape,
                weight_decay=phase.weight_decay,
                grad_clip=self.pretrain.grad_clip,
                global_batch_size=phase.global_batch_size,
                micro_batch_size=phase.micro_batch_size,
                seed=self.seed,
            )
        overrides = self.squad.recipe if of == "squad" else getattr(self.tasks, of).recipe
        return dataclasses.replace(self.finetune.recipe, **overrides)

    def run_settings(self, of: str) -> RunSettings:
        """How the run of phase1, phase2, "squad" or a task computes and records: pretrain's or
        finetune's shared keys."""
        block = self.pretrain if of in PHASES else self.finetune
        return RunSettings(
            **{field.name: getattr(block, field.name) for field in dataclasses.fields(RunSettings)}
        )

    def check_global_batch(self, of: str) -> None:
        """Every training stage, before any work: the global batch of `of` (phase1, phase2, squad or
        a task) splits into micro-batches on every process, or one line names the params."""
        recipe = self.recipe(of)
        if of in PHASES:
            where, prefix = "", f"pretrain.{of}."
        else:
            where = (
                "finetune.recipe with " + ("squad.recipe" if of == "squad" else f"tasks.{of}.recipe") + ": "
            )
            prefix = ""
        world_size = self.distributed.nproc_per_node * self.distributed.nnodes
        if recipe.global_batch_size % (recipe.micro_batch_size * world_size):
            raise UserError(
                f"params.yaml: {where}{prefix}global_batch_size {recipe.global_batch_size} is not a multiple of "
                f"{prefix}micro_batch_size {recipe.micro_batch_size} x world size {world_size} "
                "(distributed.nproc_per_node x nnodes); change one of them so that it divides exactly"
            )


def load_params(path: str | Path = PARAMS_FILE) -> Params:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: not found; run from the repository root (where dvc.yaml is)")
    raw = read_yaml(path)  # UTF-8, valid YAML, no key given twice: one line naming the line otherwise
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected the params' sections (seed:, corpora:, ...), not {_show(raw)}")
    params = _build(Params, raw, "")
    _check(params)
    return params


def _build(kind, value, name: str):
    """Turn plain YAML data into `kind` (a dataclass, list, dict, Literal, Optional, Annotated with a
    Range, or scalar), failing on the first value that does not fit with one line naming it."""
    label = name or "params.yaml"
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise UserError(f"params.yaml: {label} must be a mapping, not {_show(value)}")
        fields = [field.name for field in dataclasses.fields(kind)]
        for key in value:
            if key not in fields:
                close = difflib.get_close_matches(str(key), fields, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                moved = _moved(_join(name, key))
                hint = f"{moved}; " if moved else hint
                raise UserError(
                    f"params.yaml: unknown key {_join(name, key)}; {hint}{label} takes: {', '.join(fields)}"
                )
        for key in fields:
            if key not in value:
                raise UserError(
                    f"params.yaml: {_join(name, key)} is missing; add it (the repository's params.yaml has "
                    "every key, with its meaning)"
                )
        hints = typing.get_type_hints(kind, include_extras=True)
        built = {key: _build(hints[key], value[key], _join(name, key)) for key in fields}
        if issubclass(kind, Recipe):  # its rule across fields (Recipe.__post_init__), named as written here
            problem = schedule_problem(
                built["schedule"], built["warmup_proportion"], built["decay_share"], f"{name}."
            )
            if problem:
                raise UserError(f"params.yaml: {problem}")
        return kind(**built)
    if origin is Annotated and isinstance(typing.get_args(kind)[1], Override):
        return _build_override(typing.get_args(kind)[1].of, value, name)
    if kind in (int, float) or origin is Annotated:
        base, bounds = typing.get_args(kind) if origin is Annotated else (kind, Range())
        number = _number(value)
        fits = number is not None and math.isfinite(number) and (base is float or number == int(number))
        if not fits or base(number) not in bounds:
            raise UserError(f"params.yaml: {label} is {_show(value)}; it must be {bounds.describe(base)}")
        return base(number)
    if origin is Literal:
        return _build_word(typing.get_args(kind), value, label)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        options = [option for option in options if option is not type(None)]
        if len(options) == 1:
            return _build(options[0], value, name)
        for option in options:  # the first that takes the value, as auto | N
            try:
                return _build(option, value, name)
            except UserError:
                pass
        raise UserError(
            f"params.yaml: {label} is {_show(value)}; it must be {' or '.join(map(_describe, options))}"
        )
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"params.yaml: {label} must be a list, not {_show(value)}")
        (item,) = typing.get_args(kind)
        return [_build(item, entry, f"{label}[{index}]") for index, entry in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            moved = _moved(name)
            raise UserError(
                f"params.yaml: {label} must be a mapping, not {_show(value)}"
                + (f"; {moved}" if moved else "")
            )
        key_kind, item = typing.get_args(kind)
        return {
            _build(key_kind, str(key), f"{label} key"): _build(item, entry, _join(name, str(key)))
            for key, entry in value.items()
        }
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"params.yaml: {label} must be true or false, not {_show(value)}")
        return value
    if kind is str:
        if isinstance(value, bool):
            raise UserError(f"params.yaml: {label} is {_show(value)}: {YAML_BOOLEAN_TRAP}; quote the text")
        if not isinstance(value, str | int | float):
            raise UserError(f"params.yaml: {label} must be a string, not {_show(value)}")
        return str(value)
    raise TypeError(f"unsupported param type {kind} for {label}")


def _build_word(allowed: tuple[str, ...], value, label: str) -> str:
    """`value` when it is one of the words `allowed` (a Literal); else one line naming the param."""
    old, new = RESPELLED.get(label, (None, None))
    if old is not None and (value == old or value is False):
        raise UserError(
            f"params.yaml: {label} is {_show(value)}: the value {old} is now spelled {new} (YAML reads a "
            f"bare {old}, as `dvc exp run -S {label}={old}` writes it, as false); write {new}"
        )
    if isinstance(value, bool):
        raise UserError(
            f"params.yaml: {label} is {_show(value)}: {YAML_BOOLEAN_TRAP}; write {_quoted(allowed)}"
        )
    if value not in allowed:
        raise UserError(f"params.yaml: {label} is {_show(value)}; allowed: {', '.join(allowed)}")
    return value


def _build_override(kind, value, name: str) -> dict:
    """The keys of dataclass `kind` that `value` (a mapping, possibly empty) replaces, each built as
    that field of `kind` is."""
    if value is None:
        value = {}  # `recipe:` with nothing after it
    if not isinstance(value, dict):
        raise UserError(f"params.yaml: {name} must be a mapping (possibly empty: {{}}), not {_show(value)}")
    fields = [field.name for field in dataclasses.fields(kind)]
    hints = typing.get_type_hints(kind, include_extras=True)
    built = {}
    for key, entry in value.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UserError(
                f"params.yaml: unknown key {_join(name, key)}; {hint}{name} may override: {', '.join(fields)}"
            )
        built[key] = _build(hints[key], entry, _join(name, key))
    return built


def _describe(kind) -> str:
    """What a value of `kind` (one option of a union) may be, for a message."""
    if typing.get_origin(kind) is Literal:
        return " or ".join(map(str, typing.get_args(kind)))
    base, bounds = typing.get_args(kind) if typing.get_origin(kind) is Annotated else (kind, Range())
    return bounds.describe(base)


def _show(value) -> str:
    """A value as params.yaml spells it."""
    if value is None or isinstance(value, bool):
        return yaml.safe_dump(value).removesuffix("\n...\n")
    return repr(value)


def _quoted(options) -> str:
    *others, last = (f'"{option}"' for option in options)
    return f"{', '.join(others)} or {last}" if others else last


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _moved(dotted: str) -> str | None:
    """What MOVED says of the param `dotted` (tasks.<task>.* looked up as such), or None."""
    task = re.match(r"tasks\.(?!run\b)([^.]+)\.", dotted)
    said = MOVED.get("tasks.<task>." + dotted[task.end() :] if task else dotted)
    return said.replace("<task>", task.group(1)) if said and task else said


def _join(prefix: str, key) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _check(params: Params) -> None:
    """Rules across fields, and about files: each value alone already fits its type and range."""
    if not params.corpora:
        raise UserError("params.yaml: corpora is empty; name at least one corpus to pretrain on")
    problems = []

    def require(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    def require_sources(name: str, sources: list[str], checksums: list) -> None:
        require(bool(sources), f"{name}.sources is empty; give at least one URL or path")
        require(
            not checksums or len(checksums) == len(sources),
            f"{name}.checksums must be empty or have one entry per source",
        )
        for entry in sources:
            if "://" not in entry or entry.startswith("file://"):
                local = Path(entry.removeprefix("file://"))
                # lexists: a link that loops or dangles is there, and the stages that read the sources
                # say what is wrong with it (bert.source_tree); this check costs every stage a stat only.
                require(os.path.lexists(local), f"{name}.sources: {entry} does not exist")

    for corpus, source in params.corpora.items():
        require(
            NAME.fullmatch(corpus) is not None,
            f"corpora.{corpus}: a corpus name is a folder and stage name: letters, digits, '_' and '-'",
        )
        require_sources(f"corpora.{corpus}", source.sources, source.checksums)
        require(
            bool(source.columns) == (source.kind == "task"),
            f"corpora.{corpus}.columns: "
            + (
                "name the columns of the task's text (e.g. [sentence1, sentence2]; SQuAD: [context])"
                if source.kind == "task"
                else f"a corpus of kind {source.kind} has no columns; leave it empty ([])"
            ),
        )
    names = list(params.tasks.run)
    for position, (task, start) in enumerate(params.tasks.run.items()):
        settings: TaskParams = getattr(params.tasks, task)
        require_sources(f"tasks.{task}", settings.sources, settings.checksums)
        earlier = names[:position]
        # Listed before: no cycle can form.
        require(
            start == TASK_INIT_DEFAULT or start in earlier,
            f"tasks.run.{task} is {start!r}; allowed: {TASK_INIT_DEFAULT}, or a task listed before "
            f"{task} in tasks.run ({', '.join(earlier) or 'none'})"
            + (f": list {start} before {task}" if start in names[position + 1 :] else ""),
        )
        require(
            len(set(settings.seeds)) == len(settings.seeds),
            f"tasks.{task}.seeds names a seed twice: {', '.join(map(str, settings.seeds))}",
        )
    workers = params.compute.num_workers
    require(workers >= 0, f"compute.num_workers is {workers}; it must be an integer >= 0 (0 = all CPU cores)")
    scheduler = params.compute.scheduler
    require(
        scheduler in SCHEDULERS or is_scheduler_address(scheduler),
        f"compute.scheduler is {scheduler!r}; allowed: local, dask, or a Dask scheduler's address (tcp://host:8786)",
    )
    if is_scheduler_address(scheduler):
        problem = scheduler_address_problem(scheduler)
        require(problem is None, f"compute.scheduler is {scheduler!r}: {problem}")
    vocab_source = params.vocab.source
    require(
        vocab_source in ("train", "google", "weights") or vocab_source.startswith("file:"),
        f"vocab.source is {vocab_source!r}; allowed: train, google, file:<path>, weights",
    )
    require(
        params.vocab.kind != "bpe" or vocab_source != "train" or params.vocab.vocab_size > 261,
        f"vocab.vocab_size is {params.vocab.vocab_size}; vocab.kind bpe holds 256 byte symbols and 5 special "
        "tokens before any merge: give at least 262",
    )
    if vocab_source.startswith("file:"):
        require(Path(vocab_source[5:]).is_file(), f"vocab.source: {vocab_source[5:]} does not exist")
    require(
        vocab_source != "google" or bool(params.vocab.url),
        "vocab.url is empty; vocab.source google downloads vocab.txt from it",
    )
    for corpus in params.mixing.weights:
        require(corpus in params.corpora, f"mixing.weights.{corpus} names no corpus in corpora")
    require(
        any(params.mixing.weights.get(corpus, 1.0) > 0 for corpus in params.corpora),
        "mixing.weights leave out every corpus; give at least one a weight > 0",
    )
    for phase in ("phase1", "phase2"):
        spec: PhaseExamples = getattr(params.examples, phase)
        require(
            spec.max_predictions_per_seq <= spec.max_seq_length,
            f"examples.{phase}.max_predictions_per_seq is {spec.max_predictions_per_seq}; it must be at most "
            f"examples.{phase}.max_seq_length ({spec.max_seq_length})",
        )
    size = params.model.size
    require(
        size in SIZES or config_file(size).is_file(),
        f"model.size is {size!r}; allowed: {', '.join(SIZES)}, or a Hugging Face config.json or its folder",
    )
    require(
        len(params.squad.run) <= 1,
        f"squad.run is {params.squad.run}; it names one SQuAD version ([v1.1] or [v2.0]), or none ([]: no SQuAD)",
    )
    for version in params.squad.run:
        require(version in params.squad.sources, f"squad.sources has no entry for {version} (squad.run)")
    require(
        params.squad.doc_stride < params.squad.max_seq_length,
        f"squad.doc_stride is {params.squad.doc_stride}; it must be less than squad.max_seq_length "
        f"({params.squad.max_seq_length})",
    )
    require(
        params.squad.max_query_length < params.squad.max_seq_length - 3,
        f"squad.max_query_length is {params.squad.max_query_length}; it must leave room for the context "
        f"in squad.max_seq_length ({params.squad.max_seq_length}): at most {params.squad.max_seq_length - 4}",
    )
    for name in params.weights:
        require(
            NAME.fullmatch(name) is not None and name not in BUILT_INITS,
            f"weights.{name}: a weights name is a folder and stage name (letters, digits, '_', '-'), "
            f"and not {' or '.join(BUILT_INITS)}",
        )
    phase_problems = _phase_problems(params)
    problems += phase_problems
    if not phase_problems:  # where fine-tuning and the vocabulary start depends on the phases run
        problems += _start_problems(params)
    problems += _schedule_problems(params)
    if not phase_problems:
        problems += _model_problems(params)
    require(
        params.clean.boilerplate_min_documents != 1,
        "clean.boilerplate_min_documents is 1, which would remove every line; use 0 (off) or at least 2",
    )
    near = params.clean.near
    require(
        near.num_perm % near.bands == 0,
        f"clean.near.bands {near.bands} does not divide clean.near.num_perm {near.num_perm}; choose bands "
        "that divide it (each band holds num_perm / bands MinHash values)",
    )
    if problems:
        raise UserError("params.yaml: " + "\n  params.yaml: ".join(problems))


def _phase_problems(params: Params) -> list[str]:
    """pretrain.phases: one or both phases, in order; the first starts from random or released
    weights, the second from the first (the DAG's edge: data/weights/<start> is its dep)."""
    phases = params.pretrain.phases
    names = list(phases)
    if not names or names != [phase for phase in PHASES if phase in phases] or len(names) != len(phases):
        return [
            f"pretrain.phases names {', '.join(names) or 'no phase'}; it runs phase1, phase2 or both, in that "
            "order, each with the folder it starts from (phase1: random, phase2: phase1)"
        ]
    first, *later = names
    problems = []
    if not (phases[first] == "random" or phases[first] in params.weights):
        problems.append(
            f"pretrain.phases.{first} is {phases[first]!r}; the first phase starts from random (model.size) or "
            f"a key of weights ({', '.join(params.weights) or 'none'})"
        )
    for before, phase in zip(names, later):
        if phases[phase] != before:
            problems.append(
                f"pretrain.phases.{phase} is {phases[phase]!r}; a later phase starts from the one before it: {before}"
            )
    if params.pretrain.phase2.init_optimizer_from_phase1 and phases.get("phase2") != "phase1":
        problems.append(
            "pretrain.phase2.init_optimizer_from_phase1 is on but pretrain.phases does not run phase2 from "
            "phase1; turn it off"
        )
    return problems


def _schedule_problems(params: Params) -> list[str]:
    """Each recipe's shares of its steps (bert.training.recipe.schedule_problem): the phases', and
    SQuAD's and each run task's where its changes to finetune.recipe touch them (finetune.recipe
    itself is checked as it is built)."""
    problems = []
    for phase in PHASES:
        spec: PretrainPhase = getattr(params.pretrain, phase)
        problems.append(
            schedule_problem(spec.schedule, spec.warmup_proportion, spec.decay_share, f"pretrain.{phase}.")
        )
    for of in ("squad", *params.tasks.run):
        overrides = params.squad.recipe if of == "squad" else getattr(params.tasks, of).recipe
        if overrides.keys() & {"schedule", "warmup_proportion", "decay_share"}:
            shares = {**dataclasses.asdict(params.finetune.recipe), **overrides}
            problem = schedule_problem(shares["schedule"], shares["warmup_proportion"], shares["decay_share"])
            where = "squad.recipe" if of == "squad" else f"tasks.{of}.recipe"
            problems.append(problem and f"finetune.recipe with {where}: {problem}")
    return [problem for problem in problems if problem]


def _model_problems(params: Params) -> list[str]:
    """What a ModernBERT of model.size cannot do, where pretraining starts from it (random): it has
    no next-sentence head, and reads no sequence past its max_position_embeddings (the examples';
    SQuAD's, when fine-tuning starts from it). BERT's lengths, and released weights of either family,
    are checked where the model is loaded (stages/pretrain.py, stages/common/finetune.py)."""
    shape = family_and_positions(params.model.size)
    if params.pretrain_start != "random" or shape is None or shape[0] != "modernbert":
        return []
    positions = shape[1]
    size = f"model.size {params.model.size}"
    problems = []
    if params.examples.next_sentence:
        problems.append(
            f"examples.next_sentence is true, but {size} is a ModernBERT, which has no next-sentence head; "
            "set examples.next_sentence: false (MLM only)"
        )
    lengths = {f"examples.{phase}.max_seq_length": getattr(params.examples, phase).max_seq_length
               for phase in params.pretrain.phases}  # fmt: skip
    if params.squad.run and params.finetune.init not in params.weights:
        lengths["squad.max_seq_length"] = params.squad.max_seq_length
    problems += [
        f"{name} is {length}, longer than the {positions} positions (max_position_embeddings) of {size}; "
        f"shorten it to at most {positions}, or choose a model with more positions"
        for name, length in lengths.items()
        if length > positions
    ]
    return problems


def _start_problems(params: Params) -> list[str]:
    """Where fine-tuning starts (a phase run, random or released weights), and the vocabulary
    pretraining from released weights needs (theirs)."""
    phases, init, vocab_source = params.pretrain.phases, params.finetune.init, params.vocab.source
    problems = []
    if not (init in ("random", *phases) or init in params.weights):
        problems.append(
            f"finetune.init is {init!r}; allowed: random, a phase of pretrain.phases ({', '.join(phases)}), or "
            f"a key of weights ({', '.join(params.weights) or 'none'})"
            + (
                f"; pretrain.phases does not run {init}: start from {list(phases)[-1]}, or add {init} to it"
                if init in PHASES
                else "; to start from another Hugging Face BERT folder or URL, add it under weights"
            )
        )
    # The examples are tokenised with data/vocab: from released weights, that must be their vocabulary.
    start = params.pretrain_start
    if start != "random" and vocab_source != "weights":
        problems.append(
            f"pretrain.phases starts from {start} (released weights) but vocab.source is {vocab_source}; "
            "set vocab.source: weights, so that the examples use the vocabulary the weights were trained with"
        )
    if start == "random" and vocab_source == "weights":
        problems.append(
            "vocab.source is weights but pretrain.phases starts from random; start the first phase from a key "
            "of weights, or set vocab.source to train, google or file:<path>"
        )
    return problems


def main() -> None:
    load_params()
    print(f"{PARAMS_FILE}: every param fits (as dvc.yaml and every stage read it)")


if __name__ == "__main__":
    run_main(main)
