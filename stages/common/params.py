"""params.yaml, read through one typed schema and checked before any stage does work.

Every stage calls `load_params()`. params.yaml is the one source of values: the schema has no
defaults, so a key deleted from the file is an error naming it, never a silent switch to another
value. The schema is made of the library's own settings types wherever one exists (a phase's
recipe is `bert.training.recipe.Recipe`, `clean` is `bert.cleaning.dedup.CleanSettings`, each
`examples.<phase>` is `bert.pretraining.instances.ExampleConfig`): each value is declared once, with
its range (`Range`, in the field's type) and its rules across fields, on that type, and reaches the
function using it as that type. This module composes them and adds the rules across blocks
(`_check`); stages/common/schema.py decodes the file into them, naming every param as written.

`python -m stages.common.params` checks params.yaml alone, without DVC: where a value leaves dvc.yaml
malformed (a cycle of phases, a list for a mapping, an unknown clean.decontaminate), DVC's own
error comes before any stage runs, and this prints the project's line for it.
"""

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from bert.cleaning.settings import CleanSettings
from bert.compute import SCHEDULERS, Compute, is_scheduler_address, scheduler_address_problem
from bert.errors import UserError, run_main
from bert.inputs import read_yaml
from bert.model.presets import SIZES, config_file, family_and_positions
from bert.pretraining.examples import ExampleConfig
from bert.ranges import Count, Range, Seed, Share
from bert.tasks.catalogue import TASKS, Task
from bert.training.recipe import FineTuningRecipe, Recipe, RunSettings, schedule_problem
from stages.common.layout import BUILT_WEIGHTS, PHASES, SQUAD, run_kind
from stages.common.schema import Given, Override, decode, show

PARAMS_FILE = Path("params.yaml")
# Names that become folder and stage names (data/raw/<corpus>, download_weights@<name>).
NAME = re.compile(r"[A-Za-z0-9_-]+")
# A task's init when it starts where SQuAD does, from finetune.init's folder.
TASK_INIT_DEFAULT = "finetune.init"
# Starting folders the pipeline builds itself (data/weights/<name>): fresh weights, and each phase's model.
BUILT_INITS = tuple(BUILT_WEIGHTS)


def written_once_in(block: str, *keys: str) -> Given:
    """The fields `keys` of every phase's block, which params.yaml writes once in `block`."""
    return Given(**{key: f"{block}.{key}" for key in keys})


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


# examples.<phase> is an ExampleConfig: its lengths in the phase's block, the rest written once in examples.
EXAMPLES_OF_EVERY_PHASE = written_once_in(
    "examples",
    "masking",
    "whole_word_mask",
    "masked_lm_prob",
    "short_seq_prob",
    "dupe_factor",
    "next_sentence",
)


Examples = dataclasses.make_dataclass(
    "Examples", [(phase, Annotated[ExampleConfig, EXAMPLES_OF_EVERY_PHASE]) for phase in PHASES]
)


@dataclass
class Model:
    size: str  # a preset name, or a Hugging Face config.json or the folder holding one


@dataclass(frozen=True)
class PretrainPhase(Recipe):
    """A phase's recipe (bert.training.recipe.Recipe: every field's range, and the schedule's rule,
    there) and how long it runs. Its optimizer, grad_clip and decay_power are written once in
    pretrain for every phase (RECIPE_OF_EVERY_PHASE), its seed at the top."""

    max_steps: Count


@dataclass(frozen=True)
class PretrainPhase2(PretrainPhase):
    init_optimizer_from_phase1: bool  # phase 1 has no earlier optimizer to start from


RECIPE_OF_EVERY_PHASE = Given(
    optimizer="pretrain.optimizer",
    grad_clip="pretrain.grad_clip",
    decay_power="pretrain.decay_power",
    seed="seed",
)


@dataclass(frozen=True)
class PretrainBlock(RunSettings):
    """The phases' run settings (bert.training.recipe.RunSettings), and each phase's recipe (Pretrain)."""

    # The phases run, in order, each with the data/weights folder it starts from: the first from
    # random or a key of `weights`, the second from the first (Params.pretrain_start, _check).
    phases: dict[str, str]
    use_apex: bool
    data_workers: Annotated[int, Range(low=0, meaning="0 = load in the training process")]


# pretrain.<phase> for each phase: the first a PretrainPhase, a later one a PretrainPhase2.
Pretrain = dataclasses.make_dataclass(
    "Pretrain",
    [
        (phase, Annotated[PretrainPhase2 if later else PretrainPhase, RECIPE_OF_EVERY_PHASE])
        for later, phase in enumerate(PHASES)
    ],
    bases=(PretrainBlock,),
    frozen=True,
)


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
class TaskParams:
    """One SWAG or GLUE task: where its files come from, its length, and its recipe's overrides."""

    sources: list[str]  # the task's files, its folder, or a .zip of it (URLs or paths)
    checksums: list[str | None]  # empty: none checked; else one per source
    # Each split's file name among the sources, by split (SWAG's dev split is val.csv): a type of the
    # task's own splits (_task_params; MNLI has two dev splits). download_task@<task> finds the files
    # by these names and keeps each under its published one (bert.tasks.data.with_source_files).
    splits: object
    max_seq_length: Annotated[int, Range(low=8)]
    recipe: RecipeOverride
    # Empty: one run, with the recipe's seed. Else one run per seed (the recipe's seed replaced):
    # evaluate_task reports each measure's median over them and its spread (docs/tasks.md).
    seeds: list[Seed]


def _task_params(task: Task) -> type:
    """tasks.<task>'s block: TaskParams with a file name for each of the task's splits."""
    splits = dataclasses.make_dataclass(
        f"{task.name.capitalize()}Splits", [(split, str) for split in task.splits]
    )
    return dataclasses.make_dataclass(
        f"{task.name.capitalize()}Params", [("splits", splits)], bases=(TaskParams,)
    )


TaskName = Literal[tuple(TASKS)]
# The tasks params.yaml takes, a block each (tasks.<task>), as bert.tasks.catalogue lists them; and
# `run`: the tasks the pipeline fine-tunes on (stages finetune_task@<task>, ...), in order, each with
# where it starts: finetune.init's folder, or the model of a task before it (rte: mnli), the head
# kept when the labels are the same. dvc.yaml's dependency data/models/tasks/<start> is that
# task's model, or the committed placeholder data/models/tasks/finetune.init.
Tasks = dataclasses.make_dataclass(
    "Tasks", [("run", dict[TaskName, str]), *((name, _task_params(task)) for name, task in TASKS.items())]
)


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
    # bert.cleaning.dedup.CleanSettings; its case is the vocabulary's, its seed the top-level one
    clean: Annotated[CleanSettings, Given(lower_case="vocab.lower_case", seed="seed")]
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
        block is one (with its max_steps); SQuAD's and a task's is finetune.recipe with
        squad.recipe's or tasks.<task>.recipe's changes."""
        block = self._block(run_kind(of).of(of, "recipe"))
        if isinstance(block, Recipe):
            return _as(Recipe, block)
        return dataclasses.replace(self.finetune.recipe, **block)

    def run_settings(self, of: str) -> RunSettings:
        """How the run of phase1, phase2, "squad" or a task computes and records: pretrain's or
        finetune's shared keys."""
        return _as(RunSettings, self._block(run_kind(of).run_settings))

    def check_global_batch(self, of: str) -> None:
        """Every training stage, before any work: the global batch of `of` (phase1, phase2, squad or
        a task) splits into micro-batches on every process, or one line names the params."""
        recipe, written = self.recipe(of), run_kind(of).of(of, "recipe")
        # A phase's block is a recipe, both keys in it; SQuAD's and a task's changes finetune.recipe.
        whole = isinstance(self._block(written), Recipe)
        where, prefix = ("", f"{written}.") if whole else (f"finetune.recipe with {written}: ", "")
        world_size = self.distributed.nproc_per_node * self.distributed.nnodes
        if recipe.global_batch_size % (recipe.micro_batch_size * world_size):
            raise UserError(
                f"params.yaml: {where}{prefix}global_batch_size {recipe.global_batch_size} is not a multiple of "
                f"{prefix}micro_batch_size {recipe.micro_batch_size} x world size {world_size} "
                "(distributed.nproc_per_node x nnodes); change one of them so that it divides exactly"
            )

    def _block(self, dotted: str):
        """The value of the params block `dotted` (pretrain.phase1, tasks.rte.recipe)."""
        return functools.reduce(getattr, dotted.split("."), self)


def _as(kind: type, block):
    """`block`'s fields of the dataclass `kind` (a subclass of it, or a block that inherits its
    fields), as a `kind`: a phase's recipe without its max_steps, a block's run settings."""
    return kind(**{field.name: getattr(block, field.name) for field in dataclasses.fields(kind)})


def load_params(path: str | Path = PARAMS_FILE) -> Params:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: not found; run from the repository root (where dvc.yaml is)")
    raw = read_yaml(path)  # UTF-8, valid YAML, no key given twice: one line naming the line otherwise
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected the params' sections (seed:, corpora:, ...), not {show(raw)}")
    params = decode(Params, raw)
    _check(params)
    return params


def _check(params: Params) -> None:
    """Rules across blocks, and about files: each value alone already fits its type and range, and
    each type's own rules across its fields (bert.errors.SettingsError) hold. Every problem found
    is named, one line each."""
    if not params.corpora:
        raise UserError("params.yaml: corpora is empty; name at least one corpus to pretrain on")
    problems = [
        *_corpus_problems(params),
        *_task_problems(params),
        *_compute_problems(params.compute),
        *_vocab_problems(params),
        *_mixing_problems(params),
        *_model_size_problems(params.model.size),
        *_squad_problems(params),
        *_weights_problems(params),
    ]
    phase_problems = _phase_problems(params)
    problems += phase_problems
    if not phase_problems:  # where fine-tuning and the vocabulary start depends on the phases run
        problems += _start_problems(params)
    problems += _schedule_problems(params)
    if not phase_problems:
        problems += _model_problems(params)
    if problems:
        raise UserError("params.yaml: " + "\n  params.yaml: ".join(problems))


def _source_problems(name: str, sources: list[str], checksums: list) -> list[str]:
    """A corpus's or task's sources: at least one, a checksum for each or none, local ones there."""
    problems = []
    if not sources:
        problems.append(f"{name}.sources is empty; give at least one URL or path")
    if checksums and len(checksums) != len(sources):
        problems.append(f"{name}.checksums must be empty or have one entry per source")
    for entry in sources:
        # lexists: a link that loops or dangles is there, and the stages that read the sources say
        # what is wrong with it (bert.source_tree); this check costs every stage a stat only.
        if ("://" not in entry or entry.startswith("file://")) and not os.path.lexists(
            entry.removeprefix("file://")
        ):
            problems.append(f"{name}.sources: {entry} does not exist")
    return problems


def _corpus_problems(params: Params) -> list[str]:
    problems = []
    for corpus, source in params.corpora.items():
        if NAME.fullmatch(corpus) is None:
            problems.append(
                f"corpora.{corpus}: a corpus name is a folder and stage name: letters, digits, '_' and '-'"
            )
        problems += _source_problems(f"corpora.{corpus}", source.sources, source.checksums)
        if bool(source.columns) != (source.kind == "task"):
            problems.append(
                f"corpora.{corpus}.columns: "
                + (
                    "name the columns of the task's text (e.g. [sentence1, sentence2]; SQuAD: [context])"
                    if source.kind == "task"
                    else f"a corpus of kind {source.kind} has no columns; leave it empty ([])"
                )
            )
    return problems


def _task_problems(params: Params) -> list[str]:
    """Each task run: its sources, where it starts (finetune.init or a task listed before it, so
    that no cycle can form), its seeds."""
    problems = []
    names = list(params.tasks.run)
    for position, (task, start) in enumerate(params.tasks.run.items()):
        settings: TaskParams = getattr(params.tasks, task)
        problems += _source_problems(f"tasks.{task}", settings.sources, settings.checksums)
        earlier = names[:position]
        if not (start == TASK_INIT_DEFAULT or start in earlier):
            problems.append(
                f"tasks.run.{task} is {start!r}; allowed: {TASK_INIT_DEFAULT}, or a task listed before "
                f"{task} in tasks.run ({', '.join(earlier) or 'none'})"
                + (f": list {start} before {task}" if start in names[position + 1 :] else "")
            )
        if len(set(settings.seeds)) != len(settings.seeds):
            problems.append(f"tasks.{task}.seeds names a seed twice: {', '.join(map(str, settings.seeds))}")
    return problems


def _compute_problems(compute: Compute) -> list[str]:
    problems = []
    if compute.num_workers < 0:
        problems.append(
            f"compute.num_workers is {compute.num_workers}; it must be an integer >= 0 (0 = all CPU cores)"
        )
    scheduler = compute.scheduler
    if not (scheduler in SCHEDULERS or is_scheduler_address(scheduler)):
        problems.append(
            f"compute.scheduler is {scheduler!r}; allowed: local, dask, or a Dask scheduler's address (tcp://host:8786)"
        )
    elif is_scheduler_address(scheduler) and (problem := scheduler_address_problem(scheduler)):
        problems.append(f"compute.scheduler is {scheduler!r}: {problem}")
    return problems


def _vocab_problems(params: Params) -> list[str]:
    vocab = params.vocab
    problems = []
    if not (vocab.source in ("train", "google", "weights") or vocab.source.startswith("file:")):
        problems.append(f"vocab.source is {vocab.source!r}; allowed: train, google, file:<path>, weights")
    if vocab.kind == "bpe" and vocab.source == "train" and vocab.vocab_size <= 261:
        problems.append(
            f"vocab.vocab_size is {vocab.vocab_size}; vocab.kind bpe holds 256 byte symbols and 5 special "
            "tokens before any merge: give at least 262"
        )
    if vocab.source.startswith("file:") and not Path(vocab.source[5:]).is_file():
        problems.append(f"vocab.source: {vocab.source[5:]} does not exist")
    if vocab.source == "google" and not vocab.url:
        problems.append("vocab.url is empty; vocab.source google downloads vocab.txt from it")
    return problems


def _mixing_problems(params: Params) -> list[str]:
    weights = params.mixing.weights
    problems = [
        f"mixing.weights.{corpus} names no corpus in corpora"
        for corpus in weights
        if corpus not in params.corpora
    ]
    if not any(weights.get(corpus, 1.0) > 0 for corpus in params.corpora):
        problems.append("mixing.weights leave out every corpus; give at least one a weight > 0")
    return problems


def _model_size_problems(size: str) -> list[str]:
    if size in SIZES or config_file(size).is_file():
        return []
    return [
        f"model.size is {size!r}; allowed: {', '.join(SIZES)}, or a Hugging Face config.json or its folder"
    ]


def _squad_problems(params: Params) -> list[str]:
    squad = params.squad
    problems = []
    if len(squad.run) > 1:
        problems.append(
            f"squad.run is {squad.run}; it names one SQuAD version ([v1.1] or [v2.0]), or none ([]: no SQuAD)"
        )
    problems += [
        f"squad.sources has no entry for {version} (squad.run)"
        for version in squad.run
        if version not in squad.sources
    ]
    if squad.doc_stride >= squad.max_seq_length:
        problems.append(
            f"squad.doc_stride is {squad.doc_stride}; it must be less than squad.max_seq_length ({squad.max_seq_length})"
        )
    if squad.max_query_length >= squad.max_seq_length - 3:
        problems.append(
            f"squad.max_query_length is {squad.max_query_length}; it must leave room for the context "
            f"in squad.max_seq_length ({squad.max_seq_length}): at most {squad.max_seq_length - 4}"
        )
    return problems


def _weights_problems(params: Params) -> list[str]:
    return [
        f"weights.{name}: a weights name is a folder and stage name (letters, digits, '_', '-'), "
        f"and not {' or '.join(BUILT_INITS)}"
        for name in params.weights
        if NAME.fullmatch(name) is None or name in BUILT_INITS
    ]


def _phase_problems(params: Params) -> list[str]:
    """pretrain.phases: one or both phases, in order; the first starts from random or released
    weights, the second from the first (the DAG's edge: data/weights/<start> is its dep)."""
    phases = params.pretrain.phases
    names = list(phases)
    if not names or names != [phase for phase in PHASES if phase in phases] or len(names) != len(phases):
        starts = [
            f"{PHASES[0]}: random",
            *(f"{phase}: {before}" for before, phase in zip(PHASES, PHASES[1:])),
        ]
        return [
            f"pretrain.phases names {', '.join(names) or 'no phase'}; it runs {', '.join(PHASES)} or both, in "
            f"that order, each with the folder it starts from ({', '.join(starts)})"
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
    for phase in PHASES[1:]:  # a later phase's optimizer may start where the first one's ended
        if getattr(params.pretrain, phase).init_optimizer_from_phase1 and phases.get(phase) != PHASES[0]:
            problems.append(
                f"pretrain.{phase}.init_optimizer_from_phase1 is on but pretrain.phases does not run {phase} "
                f"from {PHASES[0]}; turn it off"
            )
    return problems


def _schedule_problems(params: Params) -> list[str]:
    """The shares of SQuAD's and each run task's steps (bert.training.recipe.schedule_problem), where
    their changes to finetune.recipe touch them: finetune.recipe itself and each phase's recipe are
    checked as they are built (Recipe.__post_init__)."""
    problems = []
    for of in (SQUAD, *params.tasks.run):
        where = run_kind(of).of(of, "recipe")
        overrides = params._block(where)
        if overrides.keys() & {"schedule", "warmup_proportion", "decay_share"}:
            shares = {**dataclasses.asdict(params.finetune.recipe), **overrides}
            problem = schedule_problem(shares["schedule"], shares["warmup_proportion"], shares["decay_share"])
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
    if getattr(params.examples, PHASES[0]).next_sentence:  # examples.next_sentence, the same in every phase
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
