"""params.yaml, read through one typed schema and checked before any stage does work.

Every stage calls `load_params()`; a wrong value fails at once with a message naming the param and
what it may be. Numbers are read as numbers even when a tool wrote them as strings: YAML 1.1
loaders read `6e-05` (which `dvc exp run --set-param` writes) as a string.
"""

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from bert.errors import UserError

PARAMS_FILE = Path("params.yaml")
MODEL_PRESETS = ("tiny", "mini", "base", "large")


@dataclass
class CorpusSource:
    sources: list[str]
    checksums: list[str | None] = field(default_factory=list)


@dataclass
class Extract:
    processes: int = 0


@dataclass
class Shard:
    num_train_shards: int = 4
    num_test_shards: int = 1
    test_fraction: float = 0.05
    min_sentences: int = 2
    punkt: Literal["auto", "pretrained", "train"] = "auto"


@dataclass
class Vocab:
    source: str = "train"  # train | google | file:<path>
    url: str = ""
    checksum: str | None = None
    vocab_size: int = 30522
    min_frequency: int = 2
    lower_case: bool = True


@dataclass
class Mixing:
    mode: Literal["intra", "inter"] = "intra"
    weights: dict[str, float] = field(default_factory=dict)
    num_output_shards: int = 4


@dataclass
class PhaseExamples:
    max_seq_length: int
    max_predictions_per_seq: int


@dataclass
class Examples:
    phase1: PhaseExamples
    phase2: PhaseExamples
    masking: Literal["static", "dynamic"] = "static"
    whole_word_mask: bool = False
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    dupe_factor: int = 5


@dataclass
class Model:
    size: str = "tiny"  # a preset name or a path to a Hugging Face config.json


@dataclass
class PretrainPhase:
    max_steps: int
    batch_size: int
    learning_rate: float
    grad_accum_steps: int = 1
    warmup_proportion: float = 0.01
    weight_decay: float = 0.01
    init_optimizer_from_phase1: bool = False


@dataclass
class Pretrain:
    phase1: PretrainPhase
    phase2: PretrainPhase
    optimizer: Literal["lamb", "adamw"] = "lamb"
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    compile: bool = False
    use_apex: bool = False
    log_every: int = 10
    save_every: int = 100
    keep_last: int = 2
    resume: bool = True
    max_nonfinite_steps: int = 10
    grad_clip: float = 1.0
    data_workers: int = 1
    length_binning: bool = False
    unpad: bool = False


@dataclass
class Distributed:
    nproc_per_node: int = 1
    nnodes: int = 1
    rdzv_endpoint: str = "localhost:29500"
    backend: Literal["auto", "nccl", "gloo"] = "auto"


@dataclass
class SquadFiles:
    train: str
    dev: str


@dataclass
class Squad:
    sources: dict[str, SquadFiles]
    version: Literal["v1.1", "v2.0"] = "v1.1"
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64


@dataclass
class Finetune:
    init: str = "phase2"  # phase2 | hf:<dir> | google-<name> | random
    epochs: float = 2.0
    batch_size: int = 32
    learning_rate: float = 5e-5
    grad_accum_steps: int = 1
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    length_binning: bool = False
    unpad: bool = False
    seed: int = 42
    log_every: int = 10
    save_every: int = 200


@dataclass
class Predict:
    batch_size: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0


@dataclass
class Benchmark:
    batch_size: int = 8
    seq_length: int = 384
    warmup_steps: int = 2
    steps: int = 5
    dev_windows: int = 256  # a seeded sample of dev windows timed as predict_squad runs them; 0: none


@dataclass
class Params:
    corpora: dict[str, CorpusSource]
    extract: Extract
    shard: Shard
    vocab: Vocab
    mixing: Mixing
    examples: Examples
    model: Model
    pretrain: Pretrain
    distributed: Distributed
    squad: Squad
    weights: dict[str, str]
    finetune: Finetune
    predict: Predict
    benchmark: Benchmark
    seed: int = 12345
    num_workers: int = 0

    @property
    def workers(self) -> int:
        """num_workers with 0 meaning every CPU core."""
        return self.num_workers or os.cpu_count() or 1


def load_params(path: str | Path = PARAMS_FILE) -> Params:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: not found; run from the repository root (where dvc.yaml is)")
    with open(path, encoding="utf-8") as file:
        try:
            raw = yaml.safe_load(file) or {}
        except yaml.YAMLError as error:
            raise UserError(f"{path}: not valid YAML: {error}") from None
    params = _build(Params, raw, "")
    _check(params)
    return params


def _build(kind, value, name: str):
    """Turn plain YAML data into `kind` (a dataclass, list, dict, Literal, Optional or scalar)."""
    label = name or "params.yaml"
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise UserError(f"params.yaml: `{label}` must be a mapping, not {value!r}")
        fields = {f.name: f for f in dataclasses.fields(kind)}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise UserError(
                f"params.yaml: unknown key `{_join(name, unknown[0])}`; `{label}` takes: {', '.join(fields)}"
            )
        built = {}
        hints = typing.get_type_hints(kind)
        for key, spec in fields.items():
            if key in value:
                built[key] = _build(hints[key], value[key], _join(name, key))
            elif spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise UserError(f"params.yaml: `{_join(name, key)}` is missing")
        return kind(**built)
    if origin is Literal:
        allowed = typing.get_args(kind)
        if value not in allowed:
            raise UserError(f"params.yaml: `{label}` is {value!r}; allowed: {', '.join(map(str, allowed))}")
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        return _build(next(option for option in options if option is not type(None)), value, name)
    if origin is list:
        if not isinstance(value, list):
            raise UserError(f"params.yaml: `{label}` must be a list, not {value!r}")
        (item,) = typing.get_args(kind)
        return [_build(item, entry, f"{label}[{index}]") for index, entry in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"params.yaml: `{label}` must be a mapping, not {value!r}")
        _, item = typing.get_args(kind)
        return {str(key): _build(item, entry, _join(name, str(key))) for key, entry in value.items()}
    if kind is bool:
        if not isinstance(value, bool):
            raise UserError(f"params.yaml: `{label}` must be true or false, not {value!r}")
        return value
    if kind in (int, float):
        number = _number(value)
        if number is None or (kind is int and number != int(number)):
            raise UserError(
                f"params.yaml: `{label}` must be {'an integer' if kind is int else 'a number'}, not {value!r}"
            )
        return kind(number)
    if kind is str:
        if not isinstance(value, str | int | float):
            raise UserError(f"params.yaml: `{label}` must be a string, not {value!r}")
        return str(value)
    raise TypeError(f"unsupported param type {kind} for {label}")


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


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _check(params: Params) -> None:
    """Cross-field rules: anything that would otherwise fail hours into a run."""
    problems = []

    def require(ok: bool, message: str) -> None:
        if not ok:
            problems.append(message)

    require(params.num_workers >= 0, "`num_workers` must be >= 0 (0 = all CPU cores)")
    for corpus, source in params.corpora.items():
        require(bool(source.sources), f"`corpora.{corpus}.sources` is empty; give at least one URL or path")
        require(
            not source.checksums or len(source.checksums) == len(source.sources),
            f"`corpora.{corpus}.checksums` must be empty or have one entry per source",
        )
        for entry in source.sources:
            if "://" not in entry or entry.startswith("file://"):
                local = Path(entry.removeprefix("file://"))
                require(local.exists(), f"`corpora.{corpus}.sources`: {entry} does not exist")
    require(params.shard.num_train_shards >= 1, "`shard.num_train_shards` must be >= 1")
    require(params.shard.num_test_shards >= 0, "`shard.num_test_shards` must be >= 0")
    require(0 <= params.shard.test_fraction < 1, "`shard.test_fraction` must be in [0, 1)")
    vocab_source = params.vocab.source
    require(
        vocab_source in ("train", "google") or vocab_source.startswith("file:"),
        f"`vocab.source` is {vocab_source!r}; allowed: train, google, file:<path>",
    )
    if vocab_source.startswith("file:"):
        require(Path(vocab_source[5:]).is_file(), f"`vocab.source`: {vocab_source[5:]} does not exist")
    require(params.vocab.vocab_size >= 100, "`vocab.vocab_size` must be >= 100")
    for corpus in params.mixing.weights:
        require(corpus in params.corpora, f"`mixing.weights.{corpus}` names no corpus in `corpora`")
    require(all(w >= 0 for w in params.mixing.weights.values()), "`mixing.weights` must be >= 0")
    require(params.mixing.num_output_shards >= 1, "`mixing.num_output_shards` must be >= 1")
    require(0 < params.examples.masked_lm_prob < 1, "`examples.masked_lm_prob` must be in (0, 1)")
    require(0 <= params.examples.short_seq_prob <= 1, "`examples.short_seq_prob` must be in [0, 1]")
    require(params.examples.dupe_factor >= 1, "`examples.dupe_factor` must be >= 1")
    for phase in ("phase1", "phase2"):
        spec: PhaseExamples = getattr(params.examples, phase)
        require(spec.max_seq_length >= 8, f"`examples.{phase}.max_seq_length` must be >= 8")
        require(
            0 < spec.max_predictions_per_seq <= spec.max_seq_length,
            f"`examples.{phase}.max_predictions_per_seq` must be in [1, max_seq_length={spec.max_seq_length}]",
        )
        train: PretrainPhase = getattr(params.pretrain, phase)
        require(train.max_steps >= 1, f"`pretrain.{phase}.max_steps` must be >= 1")
        require(train.batch_size >= 1, f"`pretrain.{phase}.batch_size` must be >= 1")
        require(train.grad_accum_steps >= 1, f"`pretrain.{phase}.grad_accum_steps` must be >= 1")
        require(train.learning_rate > 0, f"`pretrain.{phase}.learning_rate` must be > 0")
        require(0 <= train.warmup_proportion < 1, f"`pretrain.{phase}.warmup_proportion` must be in [0, 1)")
    size = params.model.size
    require(
        size in MODEL_PRESETS or Path(size).is_file(),
        f"`model.size` is {size!r}; allowed: {', '.join(MODEL_PRESETS)}, or a path to a config.json",
    )
    require(params.pretrain.log_every >= 1, "`pretrain.log_every` must be >= 1")
    require(params.pretrain.save_every >= 1, "`pretrain.save_every` must be >= 1")
    require(params.pretrain.keep_last >= 1, "`pretrain.keep_last` must be >= 1")
    require(params.distributed.nproc_per_node >= 1, "`distributed.nproc_per_node` must be >= 1")
    require(params.distributed.nnodes >= 1, "`distributed.nnodes` must be >= 1")
    require(
        params.squad.version in params.squad.sources,
        f"`squad.sources` has no entry for `{params.squad.version}`",
    )
    require(
        params.squad.doc_stride < params.squad.max_seq_length,
        "`squad.doc_stride` must be < `squad.max_seq_length`",
    )
    require(
        params.squad.max_query_length < params.squad.max_seq_length - 3,
        "`squad.max_query_length` must leave room for the context in `squad.max_seq_length`",
    )
    init = params.finetune.init
    require(
        init in ("phase2", "random") or init.startswith("hf:") or init in params.weights,
        f"`finetune.init` is {init!r}; allowed: phase2, random, hf:<dir>, or one of: {', '.join(params.weights)}",
    )
    if init.startswith("hf:"):
        require(Path(init[3:]).is_dir(), f"`finetune.init`: {init[3:]} is not a directory")
    require(params.finetune.epochs > 0, "`finetune.epochs` must be > 0")
    require(params.finetune.learning_rate > 0, "`finetune.learning_rate` must be > 0")
    require(params.finetune.batch_size >= 1, "`finetune.batch_size` must be >= 1")
    require(params.predict.n_best_size >= 1, "`predict.n_best_size` must be >= 1")
    require(params.predict.max_answer_length >= 1, "`predict.max_answer_length` must be >= 1")
    require(params.benchmark.batch_size >= 1, "`benchmark.batch_size` must be >= 1")
    require(params.benchmark.steps >= 1, "`benchmark.steps` must be >= 1")
    require(params.benchmark.dev_windows >= 0, "`benchmark.dev_windows` must be >= 0 (0: no dev-set timing)")
    if problems:
        raise UserError("params.yaml: " + "\n  params.yaml: ".join(problems))
