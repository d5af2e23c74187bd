"""One entry to both model families, BERT (bert/model/network.py) and ModernBERT
(bert/model/modernbert.py): the class for a head kind, a fresh model of `model.size`, a Hugging Face
folder loaded into the right family, so that callers need not name BertFor* or ModernBertFor*.

    model = family.from_pretrained(folder, "question_answering")       # config.json's model_type picks
    model = family.fresh(family.resolve_config("modernbert-tiny", 30522), "pretraining")
"""

from pathlib import Path

import torch

from bert.errors import UserError
from bert.model import hf, modernbert, modernbert_hf, network
from bert.model.config import BertConfig, ModernBertConfig, model_type, resolve_config

# What each head kind is in each family (the pretraining head: BERT's MLM + optional NSP; ModernBERT's MLM).
HEADS = {
    "bert": {
        "encoder": network.BertModel,
        "pretraining": network.BertForPreTraining,
        "question_answering": network.BertForQuestionAnswering,
        "sequence_classification": network.BertForSequenceClassification,
        "multiple_choice": network.BertForMultipleChoice,
    },
    "modernbert": {
        "encoder": modernbert.ModernBertModel,
        "pretraining": modernbert.ModernBertForMaskedLM,
        "question_answering": modernbert.ModernBertForQuestionAnswering,
        "sequence_classification": modernbert.ModernBertForSequenceClassification,
        "multiple_choice": modernbert.ModernBertForMultipleChoice,
    },
}

__all__ = [
    "HEADS",
    "check_pretrained",
    "family_of",
    "fresh",
    "from_pretrained",
    "model_class",
    "model_type",
    "pretraining_options",
    "resolve_config",
    "untrained_tensors",
]


def family_of(config: BertConfig | ModernBertConfig) -> str:
    return "modernbert" if isinstance(config, ModernBertConfig) else "bert"


def model_class(family: str, head: str) -> type:
    """The class of `head` (a HEADS kind) in `family` ("bert" or "modernbert")."""
    if head not in HEADS[family]:
        raise ValueError(f"head {head!r}: expected one of {', '.join(HEADS[family])}")
    return HEADS[family][head]


def fresh(config: BertConfig | ModernBertConfig, head: str, **kwargs):
    """A freshly initialised model of `config`'s family; kwargs go to its constructor."""
    return model_class(family_of(config), head)(config, **kwargs)


def from_pretrained(directory: str | Path, head: str, **kwargs):
    """A Hugging Face folder of either family (config.json's model_type) as the `head` model."""
    return model_class(model_type(directory), head).from_pretrained(directory, **kwargs)


def pretraining_options(family: str, *, unpad: bool, apex_layer_norm: bool, next_sentence: bool) -> dict:
    """The constructor options of `family`'s pretraining model. ModernBERT has no next-sentence head
    to leave out and no apex LayerNorm (its norms have no bias); `unpad` is both families'."""
    if family == "modernbert":
        return {"unpad": unpad}
    options = {"unpad": unpad, "apex_layer_norm": apex_layer_norm}
    if not next_sentence:  # MLM only: no NSP head, no pooler
        options["next_sentence"] = False
    return options


def untrained_tensors(directory: str | Path, model) -> dict:
    """The tensors of `directory` that `model` (its pretraining model, loaded from it) holds but does
    not train, to be carried to the folder it is saved in: BERT's pooler and NSP head in an MLM-only
    run (bert.model.hf.untrained_tensors); none for ModernBERT, whose MLM trains all it holds."""
    if family_of(model.config) == "modernbert":
        return {}
    return hf.untrained_tensors(directory, model)


def check_pretrained(directory: str | Path) -> "BertConfig | ModernBertConfig":
    """That a Hugging Face folder of either family will load as its encoder: config.json valid and
    every encoder tensor there with the shape it gives (names and shapes read, not the weights); its
    config. For download_weights, before it publishes the folder."""
    if model_type(directory) == "bert":
        return hf.check_pretrained(directory, network.BertModel)
    directory = Path(directory)
    config = ModernBertConfig.from_json_file(directory / "config.json")
    shapes = {}
    for path in hf.weight_files(directory):
        shapes.update(hf.tensor_shapes(path))
    shapes = modernbert_hf.normalise_keys(shapes, bare=True)
    with torch.device("meta"):  # shapes only: no memory for ModernBERT-large's weights
        expected = modernbert.ModernBertModel(config).state_dict()
    for name, tensor in expected.items():
        theirs = modernbert_hf.hf_name(name)
        if theirs not in shapes:
            raise UserError(
                f"{directory}: the weights have no tensor {theirs!r}, which config.json "
                f"({config.num_hidden_layers} layers) needs; the weights and config.json do not belong together"
            )
        if shapes[theirs] != tuple(tensor.shape):
            raise UserError(
                f"{directory}: the tensor {theirs!r} has shape {list(shapes[theirs])}, but config.json "
                f"(hidden_size {config.hidden_size}, intermediate_size {config.intermediate_size}, vocab_size "
                f"{config.vocab_size}, ...) makes it {list(tensor.shape)}; the weights and config.json do not belong together"
            )
    return config
