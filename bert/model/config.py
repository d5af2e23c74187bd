"""BERT's and ModernBERT's hyper-parameters (`BertConfig`, `ModernBertConfig`, under the field names
of Hugging Face's config.json), checked in one place whichever way they come: a size preset,
`model.size`'s config.json, a weights or fine-tuned folder, export. `resolve_config` picks the family
(config.json's model_type). Kept apart from the networks (bert/model/network.py,
bert/model/modernbert.py), so that a model file opens with the model, and reading a config needs no
torch."""

import json
import logging
import math
import numbers
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path

from bert.errors import UserError
from bert.inputs import read_json
from bert.model.presets import MODERNBERT_PRESETS, PRESETS, SIZES, config_file

log = logging.getLogger(__name__)

# The activations config.json may name (hidden_act); bert.model.network has their functions.
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


POSITIVE_INTS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)
PROBABILITIES = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _shown(value) -> str:
    """A value as config.json spells it."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _is_positive_int(value) -> bool:
    return _is_int(value) and value >= 1


def _is_probability(value) -> bool:
    return _is_number(value) and 0 <= value < 1


def _is_fraction(value) -> bool:
    return _is_number(value) and 0 < value < 1


def _is_positive_number(value) -> bool:
    return _is_number(value) and value > 0


def _is_flag(value) -> bool:
    return isinstance(value, bool)


def _is_token_id(value, vocab_size: int) -> bool:
    return _is_int(value) and 0 <= value < vocab_size


def _check_each(config, names, valid, must: str) -> None:
    """The first of the fields `names` whose value is not `valid`, as one line: "<name> is <its
    value as config.json spells it>; it must be <must>"."""
    for name in names:
        value = getattr(config, name)
        if not valid(value):
            raise UserError(f"{name} is {_shown(value)}; it must be {must}")


def _read_config_json(path: str | Path, family: str) -> tuple[Path, dict]:
    """A config.json's object, or one line saying that the file is missing or holds no object."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: model config not found")
    values = read_json(path)
    if not isinstance(values, dict):
        raise UserError(f"{path}: expected a JSON object of {family} hyper-parameters")
    return path, values


@dataclass
class BertConfig:
    """BERT's hyper-parameters, under the field names of Hugging Face's `config.json`."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    classifier_dropout: float | None = None  # the task heads' dropout; None: hidden_dropout_prob

    def __post_init__(self):
        """The one check of a BERT configuration, whichever way it came (a preset, `model.size`'s
        config.json, a weights or fine-tuned folder, export): types first (JSON's "16" and null
        are not numbers), then ranges."""
        _check_each(self, POSITIVE_INTS, _is_positive_int, "a whole number >= 1")
        is_token_id = partial(_is_token_id, vocab_size=self.vocab_size)
        _check_each(self, ("pad_token_id",), is_token_id, "a token id in [0, vocab_size)")
        # classifier_dropout may be null: the heads then take hidden_dropout_prob
        unset = ("classifier_dropout",) if self.classifier_dropout is None else ()
        probabilities = [name for name in PROBABILITIES if name not in unset]
        _check_each(self, probabilities, _is_probability, "a probability in [0, 1)")
        _check_each(self, ("initializer_range", "layer_norm_eps"), _is_fraction, "a number in (0, 1)")
        if not isinstance(self.hidden_act, str):
            raise UserError(f"hidden_act is {_shown(self.hidden_act)}; it must be the name of an activation")
        if self.hidden_size % self.num_attention_heads:
            raise UserError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads {self.num_attention_heads}"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise UserError(
                f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(ACTIVATIONS)}"
            )

    @classmethod
    def preset(cls, name: str, vocab_size: int) -> "BertConfig":
        if name not in PRESETS:
            raise UserError(f"model size {name!r}: expected one of {', '.join(PRESETS)}")
        return cls(vocab_size=vocab_size, **PRESETS[name])

    @classmethod
    def from_json_file(cls, path: str | Path) -> "BertConfig":
        """Read a Hugging Face BERT `config.json`; keys that BERT does not use are ignored."""
        path, values = _read_config_json(path, "BERT")
        if values.get("model_type", "bert") != "bert":
            raise UserError(f"{path}: model_type is {values['model_type']!r}, not 'bert'")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise UserError(f"{path}: only absolute position embeddings are supported (BERT's)")
        known = {field.name for field in fields(cls)}
        try:
            return cls(**{key: value for key, value in values.items() if key in known})
        except UserError as error:
            raise UserError(f"{path}: {error}") from None

    @classmethod
    def resolve(cls, size_or_path: str | Path, vocab_size: int | None = None) -> "BertConfig":
        """A preset name (`tiny`, `mini`, `base`, `large`) or the path of a config.json (or of the
        folder holding one). `vocab_size`, when given, overrides the file's: the model must match
        the vocabulary the data was tokenised with."""
        if str(size_or_path) in PRESETS:
            if vocab_size is None:
                raise ValueError("a preset needs vocab_size")
            return cls.preset(str(size_or_path), vocab_size)
        path = config_file(size_or_path)
        if not path.is_file():
            raise UserError(
                f"model size {str(size_or_path)!r}: expected one of {', '.join(PRESETS)}, "
                "or the path of a Hugging Face config.json"
            )
        config = cls.from_json_file(path)
        if vocab_size is not None and vocab_size != config.vocab_size:
            log.info("%s: vocab_size %d replaced by the vocabulary's %d", path, config.vocab_size, vocab_size)
            config.vocab_size = vocab_size
        return config

    def to_dict(self) -> dict:
        return asdict(self)


# ModernBERT's activations (hidden_activation, classifier_activation) as transformers names them.
MODERNBERT_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")
# config.json's names of the two kinds of layer (layer_types), as transformers 5 writes them.
GLOBAL, LOCAL = "full_attention", "sliding_attention"
MODERNBERT_POSITIVE_INTS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "max_position_embeddings",
    "global_attn_every_n_layers",
    "local_attention",
)
MODERNBERT_PROBABILITIES = (
    "embedding_dropout",
    "attention_dropout",
    "mlp_dropout",
    "classifier_dropout",
)
MODERNBERT_FLAGS = (
    "norm_bias",
    "attention_bias",
    "mlp_bias",
    "decoder_bias",
    "classifier_bias",
    "tie_word_embeddings",
)
SPECIAL_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")


@dataclass
class ModernBertConfig:
    """ModernBERT's hyper-parameters (Warner et al., 2024) under the field names of transformers'
    ModernBertConfig; the defaults are answerdotai/ModernBERT-base's. `layer_types` (one
    "full_attention" or "sliding_attention" per layer) is the truth the network reads; left out,
    it follows from `global_attn_every_n_layers` (layer i is global when i % n == 0), as in
    transformers. A sliding layer's token attends to the tokens at most local_attention // 2 away."""

    vocab_size: int = 50368
    hidden_size: int = 768
    intermediate_size: int = 1152  # each of GeGLU's two input projections
    num_hidden_layers: int = 22
    num_attention_heads: int = 12
    hidden_activation: str = "gelu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    initializer_cutoff_factor: float = 2.0
    norm_eps: float = 1e-5
    norm_bias: bool = False
    pad_token_id: int = 50283
    eos_token_id: int = 50282
    bos_token_id: int = 50281
    cls_token_id: int = 50281
    sep_token_id: int = 50282
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    global_attn_every_n_layers: int = 3
    local_attention: int = 128
    layer_types: list[str] | None = None
    attention_bias: bool = False
    attention_dropout: float = 0.0
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    classifier_pooling: str = "cls"
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    classifier_activation: str = "gelu"
    tie_word_embeddings: bool = True

    def __post_init__(self):
        """The one check of a ModernBERT configuration: types first, then ranges."""
        _check_each(self, MODERNBERT_POSITIVE_INTS, _is_positive_int, "a whole number >= 1")
        is_token_id = partial(_is_token_id, vocab_size=self.vocab_size)
        _check_each(self, SPECIAL_TOKEN_IDS, is_token_id, f"a token id in [0, vocab_size {self.vocab_size})")
        _check_each(self, MODERNBERT_PROBABILITIES, _is_probability, "a probability in [0, 1)")
        _check_each(self, ("initializer_range", "norm_eps"), _is_fraction, "a number in (0, 1)")
        positive = ("initializer_cutoff_factor", "global_rope_theta", "local_rope_theta")
        _check_each(self, positive, _is_positive_number, "a number > 0")
        _check_each(self, MODERNBERT_FLAGS, _is_flag, "true or false")
        if not self.tie_word_embeddings:
            raise UserError(
                "tie_word_embeddings is false; only a decoder tied to the embeddings is supported"
            )
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in MODERNBERT_ACTIVATIONS:
                raise UserError(
                    f"{name} is {_shown(getattr(self, name))}; use one of {list(MODERNBERT_ACTIVATIONS)}"
                )
        if self.classifier_pooling not in ("cls", "mean"):
            raise UserError(
                f'classifier_pooling is {_shown(self.classifier_pooling)}; it must be "cls" or "mean"'
            )
        if self.hidden_size % self.num_attention_heads or (self.hidden_size // self.num_attention_heads) % 2:
            raise UserError(
                f"hidden_size {self.hidden_size} / num_attention_heads {self.num_attention_heads} must be a whole, "
                "even head size (rotary positions turn pairs of dimensions)"
            )
        if self.layer_types is None:
            n = self.global_attn_every_n_layers
            self.layer_types = [GLOBAL if i % n == 0 else LOCAL for i in range(self.num_hidden_layers)]
        kinds = self.layer_types
        if (
            not isinstance(kinds, list)
            or len(kinds) != self.num_hidden_layers
            or not set(kinds) <= {GLOBAL, LOCAL}
        ):
            raise UserError(
                f"layer_types is {_shown(kinds)}; it must list {self.num_hidden_layers} (num_hidden_layers) "
                f"of {GLOBAL!r} and {LOCAL!r}"
            )

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def window_radius(self) -> int:
        """How far a sliding layer's token sees on each side (transformers' `sliding_window`)."""
        return self.local_attention // 2

    @classmethod
    def preset(cls, name: str, vocab_size: int) -> "ModernBertConfig":
        """A MODERNBERT_PRESETS size over a vocabulary of `vocab_size` tokens. Over another vocabulary
        than the released one (50,368 tokens), the special tokens are this project's WordPiece ones
        ([PAD] 0, [CLS] 2, [SEP] 3: bert.text.tokenization.SPECIAL_TOKENS)."""
        if name not in MODERNBERT_PRESETS:
            raise UserError(f"model size {name!r}: expected one of {', '.join(SIZES)}")
        special = {} if vocab_size == cls.vocab_size else WORDPIECE_SPECIAL_TOKEN_IDS
        return cls(vocab_size=vocab_size, **special, **MODERNBERT_PRESETS[name])

    @classmethod
    def from_dict(cls, values: dict) -> "ModernBertConfig":
        """From config.json's object, in either spelling: transformers 4's (global_rope_theta,
        local_rope_theta, global_attn_every_n_layers) or 5's (rope_parameters per layer type,
        layer_types); keys ModernBERT does not use are ignored."""
        values = dict(values)
        rope = values.pop("rope_parameters", None)
        if rope is not None:
            if not isinstance(rope, dict):
                raise UserError(f"rope_parameters is {_shown(rope)}; expected an object per layer type")
            for kind, field in ((GLOBAL, "global_rope_theta"), (LOCAL, "local_rope_theta")):
                part = rope.get(kind) or {}
                if part.get("rope_type", "default") != "default":
                    raise UserError(
                        f'rope_parameters.{kind}.rope_type is {_shown(part["rope_type"])}; only "default" '
                        "(plain rotary positions) is supported"
                    )
                if "rope_theta" in part:
                    values[field] = part["rope_theta"]
        if values.get("rope_scaling") is not None:
            raise UserError(
                f"rope_scaling is {_shown(values['rope_scaling'])}; scaled rotary positions are not supported"
            )
        known = {field.name for field in fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})

    @classmethod
    def from_json_file(cls, path: str | Path) -> "ModernBertConfig":
        path, values = _read_config_json(path, "ModernBERT")
        if values.get("model_type") != "modernbert":
            raise UserError(f'{path}: model_type is {_shown(values.get("model_type"))}, not "modernbert"')
        try:
            return cls.from_dict(values)
        except UserError as error:
            raise UserError(f"{path}: {error}") from None

    def to_dict(self) -> dict:
        """config.json's fields in both spellings: transformers 5 reads layer_types and
        rope_parameters, transformers 4 the thetas and global_attn_every_n_layers."""
        values = asdict(self)
        values["rope_parameters"] = {
            GLOBAL: {"rope_theta": self.global_rope_theta, "rope_type": "default"},
            LOCAL: {"rope_theta": self.local_rope_theta, "rope_type": "default"},
        }
        return values


# The ids of bert.text.tokenization.SPECIAL_TOKENS ([PAD], [UNK], [CLS], [SEP], [MASK]) in this
# project's WordPiece vocabularies, for a ModernBERT preset over one of them.
WORDPIECE_SPECIAL_TOKEN_IDS = dict(
    pad_token_id=0, bos_token_id=2, cls_token_id=2, eos_token_id=3, sep_token_id=3
)


def model_type(size_or_path: str | Path) -> str:
    """The family `model.size` names: "bert" or "modernbert" (a preset name, or config.json's
    model_type; a config.json without one is BERT's, as transformers' oldest files are)."""
    if str(size_or_path) in MODERNBERT_PRESETS:
        return "modernbert"
    if str(size_or_path) in PRESETS:
        return "bert"
    path = config_file(size_or_path)
    values = read_json(path) if path.is_file() else {}
    kind = values.get("model_type", "bert") if isinstance(values, dict) else "bert"
    return "modernbert" if kind == "modernbert" else "bert"


def resolve_config(
    size_or_path: str | Path, vocab_size: int | None = None
) -> "BertConfig | ModernBertConfig":
    """`model.size` of either family: a preset name (SIZES) or a config.json (or its folder),
    whose model_type picks the family. `vocab_size` overrides the file's, as BertConfig.resolve."""
    if model_type(size_or_path) == "bert":
        return BertConfig.resolve(size_or_path, vocab_size)
    if str(size_or_path) in MODERNBERT_PRESETS:
        if vocab_size is None:
            raise ValueError("a preset needs vocab_size")
        return ModernBertConfig.preset(str(size_or_path), vocab_size)
    path = config_file(size_or_path)
    config = ModernBertConfig.from_json_file(path)
    if vocab_size is not None and vocab_size != config.vocab_size:
        log.info("%s: vocab_size %d replaced by the vocabulary's %d", path, config.vocab_size, vocab_size)
        config.vocab_size = vocab_size
        try:
            config.__post_init__()  # the special token ids must still fit the vocabulary
        except UserError as error:
            raise UserError(f"{path}: with the vocabulary's {vocab_size} tokens, {error}") from None
    return config
