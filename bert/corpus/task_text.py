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
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.corpus.documents import DocumentWriter
from bert.corpus.downloads import downloaded_files
from bert.errors import UserError
from bert.inputs import read_json, read_rows
from bert.parallel import run_tasks

log = logging.getLogger(__name__)

DELIMITERS = {".tsv": "\t", ".csv": ","}
SQUAD_COLUMNS = ("context", "question")


def find_task_files(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    files = downloaded_files(folder).file_paths()  # never a FIFO or a link out of it
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


SQUAD_SHAPE = '{"data": [{"paragraphs": [{"context": "...", "qas": [{"question": "..."}]}]}]}'


def _squad_documents(path: Path, columns: list[str], source: str) -> Iterator[tuple[str, str]]:
    wrong = [name for name in columns if name not in SQUAD_COLUMNS]
    if wrong:
        raise UserError(
            f"{source}: a SQuAD file has no column {wrong[0]!r}; corpora.<corpus>.columns takes "
            f"{' and '.join(SQUAD_COLUMNS)} for it"
        )
    data = read_json(path, source)
    articles = _shaped(_shaped(data, dict, "the file", source).get("data"), list, "data", source)
    for article_number, article in enumerate(articles):
        where = f"data[{article_number}]"
        paragraphs = _shaped(
            _shaped(article, dict, where, source).get("paragraphs", []), list, f"{where}.paragraphs", source
        )
        for paragraph_number, paragraph in enumerate(paragraphs):
            where = f"data[{article_number}].paragraphs[{paragraph_number}]"
            paragraph = _shaped(paragraph, dict, where, source)
            texts = []
            if "context" in columns:
                texts.append(_shaped(paragraph.get("context", ""), str, f"{where}.context", source))
            if "question" in columns:
                for number, qa in enumerate(_shaped(paragraph.get("qas", []), list, f"{where}.qas", source)):
                    question = _shaped(qa, dict, f"{where}.qas[{number}]", source).get("question", "")
                    texts.append(_shaped(question, str, f"{where}.qas[{number}].question", source))
            yield (
                f"{article_number}.{paragraph_number}",
                "\n".join(text.strip() for text in texts if text.strip()),
            )


def _shaped(value, kind: type, where: str, source: str):
    """`value` when it is a `kind` (a record of the SQuAD layout at `where`), else one line naming
    the record and the layout a SQuAD file has."""
    if not isinstance(value, kind):
        shown = json.dumps(value, ensure_ascii=False)  # as the file spells it
        shown = shown if len(shown) <= 40 else f"{shown[:37]}..."
        what = {list: "a list", dict: "an object", str: "text"}[kind]
        raise UserError(
            f"{source}: {where} is {shown}, not {what}; a kind: task corpus reads a SQuAD .json as "
            f"SQuAD lays it out: {SQUAD_SHAPE}"
        )
    return value


def _origin(path: Path, root: Path, origins: Mapping[str, str]) -> str:
    return origins.get(path.relative_to(root).as_posix(), str(path))


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
    input_path: str | Path,
    out_dir: str | Path,
    corpus: str,
    compute: Compute | int,
    columns: list[str],
    origins: Mapping[str, str],
) -> TaskTextStats:
    """The text of the task files under `input_path` (the named `columns`) as the document table
    `out_dir` (atomically), with ids `<corpus>:<file>:<row or article.paragraph>`. Messages name a
    file as `origins` does ({its path under `input_path`: the source it came from, as written}),
    else by its path."""
    input_path = Path(input_path)
    files = find_task_files(input_path)
    root = input_path if input_path.is_dir() else input_path.parent
    with atomic_folder(out_dir) as tmp_dir:
        tasks = [
            (
                str(path),
                str(root),
                _origin(path, root, origins),
                str(tmp_dir),
                f"part-{number:05d}",
                corpus,
                list(columns),
            )
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
