"""The model of each kind of task, in its folder's family (BERT or ModernBERT, bert.model.family): a
multiple-choice model for SWAG, a sequence classifier (a class, or a score for STS-B) for GLUE; and
where it starts: a pretrained encoder, or another task's fine-tuned model (RTE, MRPC and STS-B from
MNLI's, as MosaicBERT and ModernBERT report)."""

import logging
from pathlib import Path

from bert.inputs import read_json
from bert.model import family
from bert.tasks.catalogue import Task

log = logging.getLogger(__name__)


def load_task_model(task: Task, directory: Path, **kwargs):
    """The task's model from a Hugging Face directory (its head fresh when the folder has none)."""
    if task.kind == "choice":
        return family.from_pretrained(directory, "multiple_choice", **kwargs)
    return family.from_pretrained(directory, "sequence_classification", num_labels=task.num_labels, **kwargs)


def head_carries_over(task: Task, source: Task) -> bool:
    """Whether a head fine-tuned on `source` means the same for `task`: the same kind of head and
    the same labels in the same order (QNLI's entailment / not_entailment for RTE), so its
    outputs are the task's classes. MNLI's three classes are not RTE's two, nor a score (STS-B)."""
    if task.kind != source.kind:
        return False
    if task.kind == "choice":
        return task.num_labels == source.num_labels
    return task.labels == source.labels


def load_task_model_from_task(task: Task, source: Task, directory: Path, **kwargs):
    """The task's model from `source`'s fine-tuned model in `directory`: its encoder and pooler,
    and its head when it carries over (head_carries_over), else a fresh one; the log says which."""
    made_for = read_json(directory / "config.json").get("id2label")
    keep = head_carries_over(task, source)
    if task.kind == "choice":
        model = family.from_pretrained(directory, "multiple_choice", fresh_head=not keep, **kwargs)
    else:
        model = family.from_pretrained(
            directory, "sequence_classification", num_labels=task.num_labels, fresh_head=not keep, **kwargs
        )
    if keep:
        log.info(
            "%s starts from %s's model (%s), its head kept: the same labels",
            task.title,
            source.title,
            directory,
        )
    else:
        labels = ", ".join(made_for.values()) if isinstance(made_for, dict) else source.kind
        log.info(
            "%s starts from %s's model (%s), its head re-initialised: %s's labels (%s) are not %s's (%s)",
            task.title, source.title, directory, source.title, labels, task.title,
            ", ".join(task.labels) if task.labels else "a score",
        )  # fmt: skip
    return model
