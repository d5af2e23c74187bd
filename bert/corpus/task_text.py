"""A fine-tuning task's own text as a corpus (kind `task`): task-adaptive pretraining.

Gururangan et al. (2020, "Don't stop pretraining") continue pretraining on the task's unlabelled
text before fine-tuning on it. The corpus is the task's files themselves, fetched and tracked by
content like every source, so an edited task file reruns the corpus and the pretraining made of
it. What is read:
- a delimited file with a header line (GLUE's `.tsv`, unquoted; SWAG's `.csv`, quoted): one
  document per row, the row's named columns its paragraphs, in the order the param names them
  (RTE's `sentence1`, `sentence2`). A headerless file (CoLA's) has no names to give: refused.
- a SQuAD `.json` file: one document per paragraph, `context` its context and `question` its
  questions (one paragraph each).
The labels are never read. A document that repeats an earlier one of the same file (MNLI's
premises come with three hypotheses each; name only `sentence1` and each premise would appear
three times) is left out and counted, so no text is seen more often than the task holds it.

Each file is one task of the engine (bert.parallel), writing its own parts of the table
(`part-<file>-<n>.parquet`), so the table is in file order whatever the number of workers.
"""

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.corpus.documents import DocumentWriter
from bert.errors import UserError
from bert.inputs import read_json, read_rows
from bert.parallel import run_tasks
from bert.source_tree import STRICT, walk_source

log = logging.getLogger(__name__)

DELIMITERS = {".tsv": "\t", ".csv": ","}
SQUAD_COLUMNS = ("context", "question")


def find_task_files(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    if not folder.exists():
        raise UserError(f"{folder}: not found; run `dvc repro download@{folder.name}` first")
    files = walk_source(str(folder), folder, STRICT).file_paths()  # never a FIFO or a link out of it
    found = [path for path in files if path.suffix in (*DELIMITERS, ".json")]
    if not found:
        raise UserError(f"{folder}: no .tsv, .csv or SQuAD .json files among the task's files")
    return found


def task_documents(path: Path, columns: list[str], source: str) -> Iterator[tuple[str, str]]:
    """(id within the file, text) of each document of one task file; `source` names it in errors."""
    if path.suffix == ".json":
        yield from _squad_documents(path, columns, source)
        return
    rows = read_rows(path, DELIMITERS[path.suffix], source)
    header = [name.lstrip("\ufeff") for name in rows[0]] if rows else []  # MRPC's files begin with a BOM
    missing = [name for name in columns if name not in header]
    if missing:
        raise UserError(
            f"{source}: no column {missing[0]!r} in its header ({', '.join(header[:8]) or 'none'}); "
            "name the columns of the task's text in corpora.<corpus>.columns (a file without a header "
            "line, as CoLA's, cannot be read by name)"
        )
    at = [header.index(name) for name in columns]
    for number, fields in enumerate(rows[1:], start=2):
        if len(fields) != len(header):
            continue  # QQP's rows broken by a stray newline, as the task's reader skips them
        paragraphs = [fields[index].strip() for index in at]
        yield str(number), "\n".join(paragraph for paragraph in paragraphs if paragraph)


def _squad_documents(path: Path, columns: list[str], source: str) -> Iterator[tuple[str, str]]:
    wrong = [name for name in columns if name not in SQUAD_COLUMNS]
    if wrong:
        raise UserError(
            f"{source}: a SQuAD file has no column {wrong[0]!r}; corpora.<corpus>.columns takes "
            f"{' and '.join(SQUAD_COLUMNS)} for it"
        )
    data = read_json(path, source)
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list):
        raise UserError(f"{source}: no 'data' list of articles; not a SQuAD file")
    for article_number, article in enumerate(articles):
        for paragraph_number, paragraph in enumerate(article.get("paragraphs") or []):
            texts = []
            if "context" in columns:
                texts.append(str(paragraph.get("context", "")).strip())
            if "question" in columns:
                texts += [str(qa.get("question", "")).strip() for qa in paragraph.get("qas") or []]
            yield f"{article_number}.{paragraph_number}", "\n".join(text for text in texts if text)


def _format_file(path: str, root: str, source: str, folder: str, name: str, corpus: str, columns: list[str]):
    """One task file's documents into the parts `name-*` of the table `folder`: (documents
    written, empty rows skipped, repeats skipped)."""
    path = Path(path)
    file_name = path.relative_to(root).with_suffix("").as_posix()
    seen: set[bytes] = set()
    empty = repeated = 0
    with DocumentWriter(Path(folder), name=name) as writer:
        for key, text in task_documents(path, columns, source):
            if not text:
                empty += 1
                continue
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
            if digest in seen:
                repeated += 1
                continue
            seen.add(digest)
            writer.add(corpus, f"{corpus}:{file_name}:{key}", file_name, text)
    return writer.documents, empty, repeated


@dataclass
class TaskTextStats:
    files: int = 0
    documents: int = 0
    skipped_empty: int = 0
    skipped_repeated: int = 0

    def metrics(self) -> dict:
        return {
            "files": self.files,
            "documents": self.documents,
            "skipped_empty": self.skipped_empty,
            "skipped_repeated": self.skipped_repeated,
        }


def format_task_text(
    input_path: str | Path, out_dir: str | Path, corpus: str, compute: Compute | int, columns: list[str]
) -> TaskTextStats:
    """The text of the task files under `input_path` (the named `columns`) as the document table
    `out_dir` (atomically), with ids `<corpus>:<file>:<row or article.paragraph>`."""
    input_path = Path(input_path)
    files = find_task_files(input_path)
    root = input_path if input_path.is_dir() else input_path.parent
    with atomic_folder(out_dir) as tmp_dir:
        tasks = [
            (str(path), str(root), str(path), str(tmp_dir), f"part-{number:05d}", corpus, list(columns))
            for number, path in enumerate(files)
        ]
        results = run_tasks(_format_file, tasks, compute, "task files", describe=lambda task: task[2])
        stats = TaskTextStats(
            len(files), *(sum(result[index] for result in results) for index in range(3))
        )  # fmt: skip
        if stats.documents == 0:
            raise UserError(
                f"{input_path}: the columns {', '.join(columns)} hold no text; nothing to pretrain on"
            )
    log.info(
        "%d documents from %d task files (columns %s; %d empty and %d repeated rows skipped)",
        stats.documents, stats.files, ", ".join(columns), stats.skipped_empty, stats.skipped_repeated,
    )  # fmt: skip
    return stats
