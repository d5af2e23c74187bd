"""The model of each kind of task: BertForMultipleChoice for SWAG, BertForSequenceClassification
(a class, or a score for STS-B) for GLUE."""

from pathlib import Path

from bert.model.network import BertForMultipleChoice, BertForSequenceClassification
from bert.tasks.data import Task


def load_task_model(task: Task, directory: Path, **kwargs):
    """The task's model from a Hugging Face directory (its head fresh when the folder has none)."""
    if task.kind == "choice":
        return BertForMultipleChoice.from_pretrained(directory, **kwargs)
    return BertForSequenceClassification.from_pretrained(directory, num_labels=task.num_labels, **kwargs)
