"""SWAG and GLUE as published: each task's files, columns, labels and measures, and one reader.

The files are read in the formats their authors distribute, quirks included:
- SWAG (rowanz/swagaf `data/train.csv`, `val.csv`): CSV whose first column is an unnamed row index;
  the question is `sent1` and each choice is `sent2` followed by `ending0`..`ending3`, as
  NVIDIA's and Google's run_swag.py build them.
- GLUE (the task folders `download_glue_data.py` writes): tab-separated, no quoting. CoLA has no
  header line; MRPC's files begin with a byte-order mark; MNLI has a train file of 12 columns and
  two dev files (matched, mismatched genres) of 16; STS-B's labels are similarity scores in [0, 5];
  QQP's train file has a few rows broken by stray newlines, which are skipped (counted in the log),
  as every reference implementation does.
Columns are found by the header's names, so a file of another task (or a shifted column) is one
line naming the file, never a model trained on the wrong column.
"""

import logging
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bert.errors import UserError
from bert.inputs import read_rows
from bert.tasks.catalogue import Task

log = logging.getLogger(__name__)


@dataclass
class TaskExamples:
    """A split as the model sees it: per example the first text and its second texts (none for a
    single-sentence task, one for a pair, one per choice), and the label: a class or choice index,
    or a score. `rows` are the examples' line numbers in the file (1-based, the header counted)."""

    first: list[str]
    second: list[tuple[str, ...]]
    labels: np.ndarray  # int64 [N], or float32 [N] for a score
    rows: list[int]

    def __len__(self) -> int:
        return len(self.first)


def dev_in_train(train: TaskExamples, dev: TaskExamples) -> int:
    """How many examples of `dev` also appear in `train`: all their texts equal (the choices' too),
    each text's whitespace runs one space; labels aside, as a copy relabelled is still a copy. A
    dev split copied from train, or overlapping it (a re-split gone wrong), scores what the model
    memorised."""
    seen = {_texts_key(first, second) for first, second in zip(train.first, train.second)}
    return sum(_texts_key(first, second) in seen for first, second in zip(dev.first, dev.second))


def _texts_key(first: str, second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(" ".join(text.split()) for text in (first, *second))


def read_split(task: Task, path: str | Path, source: str | None = None) -> TaskExamples:
    """One file of `task`, checked row by row: bytes that are not UTF-8, a missing column, an
    empty text or a label out of range is one line naming the file (`source`: as the user wrote
    it, when `path` is a copy) and the line."""
    path = Path(path)
    source = source or str(path)
    if not path.is_file():
        raise UserError(f"{source}: not found; run `dvc repro download_task@{task.name}`")
    # GLUE's TSVs are unquoted: a quote character is text (QQP questions hold many); SWAG is CSV.
    lines = read_rows(path, task.delimiter, source)
    if task.columns_without_header:
        header, body, first_line = list(task.columns_without_header), lines, 1
    else:
        if not lines:
            raise UserError(f"{source}: empty; expected {task.title}'s header line")
        header, body, first_line = lines[0], lines[1:], 2
    wanted = [*task.text_columns, *task.choice_columns, task.label_column]
    missing = [name for name in wanted if name not in header]
    if missing:
        raise UserError(
            f"{source}: no column {missing[0]!r} in its header ({_shown(header)}); this is not {task.title}'s "
            f"{path.name} (expected the columns {', '.join(wanted)})"
        )
    at = {name: header.index(name) for name in wanted}
    first, second, labels, rows, skipped = [], [], [], [], 0
    for number, fields in enumerate(body, start=first_line):
        if not fields or fields == [""]:
            continue
        if len(fields) != len(header):
            if task.skip_short_rows and len(fields) < len(header):
                skipped += 1
                continue
            raise UserError(
                f"{source}: line {number} has {len(fields)} fields, the header {len(header)} "
                f"({_shown(header)}); fix or remove the line"
            )
        texts = [fields[at[name]].strip() for name in task.text_columns]
        empty = [name for name, text in zip(task.text_columns, texts) if not text]
        # SWAG's sent2 may be empty: the choices then begin with their endings.
        if empty and not (task.choice_columns and empty == [task.text_columns[-1]]):
            raise UserError(f"{source}: line {number}: column {empty[0]!r} is empty")
        labels.append(_label(task, fields[at[task.label_column]], source, number))
        first.append(texts[0])
        if task.choice_columns:
            start = texts[1]
            second.append(
                tuple(f"{start} {fields[at[name]].strip()}".strip() for name in task.choice_columns)
            )
        else:
            second.append(tuple(texts[1:]))
        rows.append(number)
    if skipped:
        log.warning(
            "%s: skipped %d rows with missing fields (a known quirk of %s)", source, skipped, task.title
        )
    if not first:
        raise UserError(f"{source}: no examples")
    dtype = np.int64 if task.labels else np.float32
    return TaskExamples(first, second, np.array(labels, dtype=dtype), rows)


def _label(task: Task, value: str, source: str, number: int) -> int | float:
    value = value.strip()
    if task.labels:
        if value not in task.labels:
            raise UserError(
                f"{source}: line {number}: label {value!r} is not one of {task.title}'s labels "
                f"({', '.join(task.labels)})"
            )
        return task.labels.index(value)
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    low, high = task.score_range
    if not low <= score <= high:
        raise UserError(f"{source}: line {number}: score {value!r} is not a number in [{low:g}, {high:g}]")
    return score


def _shown(header: list[str]) -> str:
    shown = ", ".join(header[:8])
    return shown + (", ..." if len(header) > 8 else "")


def with_source_files(task: Task, files: dict[str, str], param: str) -> Task:
    """`task` with its splits found under other file names (`param`: where they come from, for
    the message): a re-split or a private set names its files as it likes. Every split of the task
    is named, by a file name without a folder."""
    if set(files) != set(task.splits):
        raise UserError(
            f"params.yaml: {param} names the splits {', '.join(files) or 'none'}; {task.title} has "
            f"{', '.join(task.splits)}: give each a file name (as published: "
            f"{', '.join(f'{split}: {name}' for split, name in task.splits.items())})"
        )
    for split, name in files.items():
        if not name or Path(name).name != name:
            raise UserError(f"params.yaml: {param}.{split} is {name!r}; give a file name, without a folder")
    if len(set(files.values())) != len(files):
        raise UserError(f"params.yaml: {param} names one file for two splits; each split is its own file")
    return replace(task, splits={split: files[split] for split in task.splits})


def find_split_files(task: Task, folder: Path) -> dict[str, Path]:
    """The task's files in a folder of downloads (a GLUE zip unpacks into <Task>/), by split."""
    found = {}
    for split, name in task.splits.items():
        matches = sorted(folder.rglob(name))
        if not matches:
            raise UserError(
                f"{folder}: no {name} among the downloaded files for {task.title}; point "
                f"tasks.{task.name}.sources at the task's folder, its .zip, or its files ({', '.join(task.splits.values())}), "
                f"or name its files in tasks.{task.name}.splits"
            )
        if len(matches) > 1:
            raise UserError(
                f"tasks.{task.name}.sources: several {name} for {task.title}: {', '.join(map(str, matches))} "
                "(the task's folder and its .zip, say); keep one of them in tasks."
                f"{task.name}.sources"
            )
        found[split] = matches[0]
    return found
