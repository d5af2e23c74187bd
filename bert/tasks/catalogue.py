"""The fine-tuning tasks: SWAG and GLUE's, each with its files, columns, labels and measures
(`TASKS`, in the order params.yaml lists them). The one list of the task names: the params
schema takes a block for each (tasks.<task>), the task stages one run each. A module of its own,
without the readers (bert.tasks.data), so that every stage can read params.yaml's schema without
importing them."""

from dataclasses import dataclass

from bert.errors import UserError


@dataclass(frozen=True)
class Task:
    name: str  # the key in params.yaml tasks:, and in stage names (finetune_task@<name>)
    title: str  # as the papers write it
    splits: dict[str, str]  # split -> file name: "train" and the dev splits
    text_columns: tuple[str, ...]  # the question (or single sentence), then the second text
    label_column: str
    labels: tuple[str, ...] | None  # label values as written, in class order; None: a score
    metrics: tuple[str, ...]  # the official measures, the first one the main one
    delimiter: str = "\t"
    # No header line (CoLA): the column names of its fields, in order.
    columns_without_header: tuple[str, ...] | None = None
    choice_columns: tuple[str, ...] = ()  # multiple choice: the endings, each after the last text column
    skip_short_rows: bool = False  # QQP: rows broken by a newline are left out, as everyone does
    score_range: tuple[float, float] | None = None

    @property
    def kind(self) -> str:
        """choice (one score per choice) | classification | regression."""
        if self.choice_columns:
            return "choice"
        return "classification" if self.labels else "regression"

    @property
    def num_labels(self) -> int:
        """Outputs of the head: classes, 1 for a score; for multiple choice, the choices."""
        if self.choice_columns:
            return len(self.choice_columns)
        return len(self.labels) if self.labels else 1

    @property
    def dev_splits(self) -> list[str]:
        return [split for split in self.splits if split != "train"]


BINARY = ("0", "1")
ENTAILMENT = ("entailment", "not_entailment")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            "swag", "SWAG", {"train": "train.csv", "dev": "val.csv"}, ("sent1", "sent2"), "label",
            ("0", "1", "2", "3"), ("accuracy",), delimiter=",",
            choice_columns=("ending0", "ending1", "ending2", "ending3"),
        ),
        Task(
            "cola", "CoLA", {"train": "train.tsv", "dev": "dev.tsv"}, ("sentence",), "label", BINARY,
            ("matthews_corrcoef",), columns_without_header=("source", "label", "original_mark", "sentence"),
        ),
        Task("sst2", "SST-2", {"train": "train.tsv", "dev": "dev.tsv"}, ("sentence",), "label", BINARY, ("accuracy",)),
        Task(
            "mrpc", "MRPC", {"train": "train.tsv", "dev": "dev.tsv"}, ("#1 String", "#2 String"), "Quality",
            BINARY, ("f1", "accuracy"),
        ),
        Task(
            "stsb", "STS-B", {"train": "train.tsv", "dev": "dev.tsv"}, ("sentence1", "sentence2"), "score",
            None, ("pearson", "spearman"), score_range=(0.0, 5.0),
        ),
        Task(
            "qqp", "QQP", {"train": "train.tsv", "dev": "dev.tsv"}, ("question1", "question2"), "is_duplicate",
            BINARY, ("f1", "accuracy"), skip_short_rows=True,
        ),
        Task(
            "mnli", "MNLI",
            {"train": "train.tsv", "dev_matched": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv"},
            ("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"), ("accuracy",),
        ),
        Task("qnli", "QNLI", {"train": "train.tsv", "dev": "dev.tsv"}, ("question", "sentence"), "label", ENTAILMENT, ("accuracy",)),
        Task("rte", "RTE", {"train": "train.tsv", "dev": "dev.tsv"}, ("sentence1", "sentence2"), "label", ENTAILMENT, ("accuracy",)),
    )
}  # fmt: skip
# GLUE as the BERT paper scores it: WNLI is left out (its dev set is adversarial to every model
# trained on its train set, and BERT's authors predict the majority class). SWAG is no GLUE task.
GLUE_TASKS = tuple(name for name in TASKS if name != "swag")


def task_named(name: str) -> Task:
    if name not in TASKS:
        raise UserError(f"no task {name!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[name]
