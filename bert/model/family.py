"""One entry to both model families, BERT (bert/model/network.py) and ModernBERT
(bert/model/modernbert.py): the class for a head kind, a fresh model of `model.size`, a Hugging Face
folder loaded into the right family, so that callers need not name BertFor* or ModernBertFor*.

    model = family.from_pretrained(folder, "question_answering")       # config.json's model_type picks
    model = family.fresh(family.resolve_config("modernbert-tiny", 30522), "pretraining")
"""

from pathlib import Path

from bert.model import modernbert, network
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

__all__ = ["HEADS", "family_of", "fresh", "from_pretrained", "model_class", "resolve_config"]


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
