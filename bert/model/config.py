"""BERT's hyper-parameters (`BertConfig`, under the field names of Hugging Face's config.json),
checked in one place whichever way they come: a size preset, `model.size`'s config.json, a weights
or fine-tuned folder, export. Kept apart from the network (bert/model/network.py), so that the model
file opens with the model, and reading a config needs no torch."""

import json
import logging
import math
import numbers
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from bert.errors import UserError
from bert.inputs import read_json
from bert.model.presets import PRESETS, config_file

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
        for name in POSITIVE_INTS:
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise UserError(f"{name} is {_shown(value)}; it must be a whole number >= 1")
        if not _is_int(self.pad_token_id) or not 0 <= self.pad_token_id < self.vocab_size:
            raise UserError(
                f"pad_token_id is {_shown(self.pad_token_id)}; it must be a token id in [0, vocab_size)"
            )
        for name in PROBABILITIES:
            value = getattr(self, name)
            if name == "classifier_dropout" and value is None:
                continue
            if not _is_number(value) or not 0 <= value < 1:
                raise UserError(f"{name} is {_shown(value)}; it must be a probability in [0, 1)")
        for name in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, name)
            if not _is_number(value) or not 0 < value < 1:
                raise UserError(f"{name} is {_shown(value)}; it must be a number in (0, 1)")
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
        path = Path(path)
        if not path.is_file():
            raise UserError(f"{path}: model config not found")
        values = read_json(path)
        if not isinstance(values, dict):
            raise UserError(f"{path}: expected a JSON object of BERT hyper-parameters")
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
