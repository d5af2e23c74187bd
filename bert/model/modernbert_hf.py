"""Hugging Face interop for ModernBERT: read and write the folders of transformers' ModernBert* classes.

A folder holds config.json (model_type "modernbert", ModernBertConfig's fields) and the weights
(model.safetensors, or shards with an index; bert/model/hf.py reads them). Our modules are named for
reading; `hf_name` is the one place that says which of our tensors is which of transformers'. The
encoder sits under `model.` in every transformers head, and at the root of a bare ModernBertModel.
Like bert/model/hf.py, this module never imports the network: it tells the models apart by class
name, as config.json's `architectures` tells transformers' apart.
"""

import json
import logging
from pathlib import Path

import torch
from safetensors.torch import save_file

from bert.atomic import atomic_folder
from bert.errors import UserError
from bert.model.config import ModernBertConfig
from bert.model.hf import head_config, read_hf_weights, write_vocabulary

log = logging.getLogger(__name__)

# Our module names -> transformers', part by part of a state_dict key.
RENAMES = {
    "word_embeddings": "tok_embeddings",
    "attention_norm": "attn_norm",
    "attention": "attn",
    "qkv": "Wqkv",
    "out": "Wo",
    "mlp_in": "mlp.Wi",
    "mlp_out": "mlp.Wo",
    "decoder_bias": "decoder.bias",
}
# Tensors of a transformers folder that carry nothing of their own: the decoder's weight is the
# word embedding matrix (tied), which transformers may or may not write.
REDUNDANT_KEYS = ("decoder.weight",)
HEAD_PREFIXES = ("head.", "decoder.", "classifier.")


def hf_name(ours: str) -> str:
    """Our state_dict key -> transformers' (model. -> model.; layers.3.attention.qkv.weight ->
    layers.3.attn.Wqkv.weight; decoder_bias -> decoder.bias)."""
    return ".".join(RENAMES.get(part, part) for part in ours.split("."))


def to_hf_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Our weights under transformers' names, separate and contiguous (as safetensors wants)."""
    return {
        hf_name(name): tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()
    }


def _is_encoder(name: str, bare: bool) -> bool:
    return not name.startswith(HEAD_PREFIXES) if bare else name.startswith("model.")


def normalise_keys(hf_state: dict[str, torch.Tensor], bare: bool) -> dict[str, torch.Tensor]:
    """A bare ModernBertModel's folder has its encoder at the root, a head's under `model.`: bring
    the folder's keys to the form of the model being loaded."""
    head_model = any(name.startswith("model.") for name in hf_state)
    normalised = {}
    for name, tensor in hf_state.items():
        if name in REDUNDANT_KEYS:
            continue
        if bare and head_model:
            if not name.startswith("model."):
                continue  # a head's own tensors: a bare encoder has no use for them
            name = name.removeprefix("model.")
        elif not bare and not head_model:
            name = "model." + name
        normalised[name] = tensor
    return normalised


def _num_labels(directory: Path, hf_state: dict[str, torch.Tensor], asked: int | None) -> int:
    """A sequence classifier's size: the folder's classifier when it has one (and `asked`, if
    given, must agree), else `asked` for a fresh head."""
    classifier = hf_state.get("classifier.weight")
    if classifier is None:
        if asked is None:
            raise UserError(f"{directory}: the weights hold no classifier: pass num_labels for a fresh head")
        return asked
    if asked is not None and asked != classifier.shape[0]:
        raise UserError(
            f"{directory}: fine-tuned for {classifier.shape[0]} labels, not the num_labels={asked} asked for"
        )
    return classifier.shape[0]


def load_pretrained(cls, directory: str | Path, *, fresh_head: bool = False, **kwargs):
    """`cls.from_pretrained(directory)` for our ModernBERT classes. The encoder must be complete
    and exactly what config.json describes (a missing, extra or mis-shaped tensor is one line);
    head tensors the folder lacks start fresh (a warning), those of another head are left behind.
    `fresh_head`: leave the folder's task classifier behind (another task's)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: model directory not found")
    config = ModernBertConfig.from_json_file(directory / "config.json")
    bare = cls.__name__ == "ModernBertModel"
    hf_state = normalise_keys(read_hf_weights(directory), bare)
    if fresh_head:
        hf_state = {name: tensor for name, tensor in hf_state.items() if not name.startswith("classifier.")}
    if cls.__name__ == "ModernBertForSequenceClassification":
        kwargs["num_labels"] = _num_labels(directory, hf_state, kwargs.get("num_labels"))
    model = cls(config, **kwargs)
    expected = {hf_name(name): (name, tensor.shape) for name, tensor in model.state_dict().items()}

    encoder_missing = [name for name in expected if _is_encoder(name, bare) and name not in hf_state]
    encoder_extra = [name for name in hf_state if _is_encoder(name, bare) and name not in expected]
    if encoder_missing or encoder_extra:
        what = (
            f"lack {encoder_missing[0]!r}"
            if encoder_missing
            else f"hold {encoder_extra[0]!r}, which it has no place for"
        )
        raise UserError(
            f"{directory}: not a ModernBERT of its config.json ({config.num_hidden_layers} layers, norm_bias "
            f"{config.norm_bias}, attention_bias {config.attention_bias}, mlp_bias {config.mlp_bias}): the weights {what}"
        )
    ours, fresh = {}, []
    for theirs, (mine, shape) in expected.items():
        if theirs not in hf_state:
            fresh.append(mine)
            continue
        tensor = hf_state.pop(theirs)
        if tensor.shape != shape:
            raise UserError(
                f"{directory}: the tensor {theirs!r} has shape {list(tensor.shape)}, but config.json makes it "
                f"{list(shape)}; the weights and config.json do not belong together"
            )
        ours[mine] = tensor
    if fresh:
        log.warning("%s: not in the checkpoint, freshly initialised: %s", directory, ", ".join(fresh))
    if hf_state:
        log.warning("%s: weights not used by %s: %s", directory, cls.__name__, ", ".join(sorted(hf_state)))
    model.load_state_dict(ours, strict=False)
    return model.eval()


# Our class -> the transformers class that loads what it saves.
ARCHITECTURES = {
    "ModernBertModel": "ModernBertModel",
    "ModernBertForMaskedLM": "ModernBertForMaskedLM",
    "ModernBertForQuestionAnswering": "ModernBertForQuestionAnswering",
    "ModernBertForSequenceClassification": "ModernBertForSequenceClassification",
    "ModernBertForMultipleChoice": "ModernBertForMultipleChoice",
}


def save_pretrained(
    model,
    directory: str | Path,
    vocab_file: str | Path | None = None,
    lower_case: bool = True,
    label_names: tuple[str, ...] | None = None,
) -> None:
    """Write config.json and model.safetensors, so that transformers' ModernBert* class of the same
    name loads the model with the same outputs, and given `vocab_file` (a WordPiece vocabulary) its
    vocab.txt + tokenizer_config.json; complete or absent (written beside, then renamed)."""
    config = {
        "architectures": [ARCHITECTURES[type(model).__name__]],
        "model_type": "modernbert",
        **model.config.to_dict(),
        **head_config(model, label_names),
    }
    with atomic_folder(directory) as staging:
        (staging / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(to_hf_state_dict(model), staging / "model.safetensors", metadata={"format": "pt"})
        if vocab_file is not None:
            write_vocabulary(staging, vocab_file, lower_case, model.config.max_position_embeddings)
