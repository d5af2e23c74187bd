"""Plain text (a folder of .txt files and/or Parquet files with a `text` column) -> document table.

The `text` kind of corpus: BookCorpus in either of its forms, or any collection of documents.
One document per .txt file (a book) or per book of a Parquet file. Paragraphs are separated by "\n" as in the Wikipedia documents:
- a `.txt` book: runs of non-blank lines separated by blank lines are paragraphs (their lines
  joined by spaces, so hard-wrapped prose is rejoined); a file without any blank line is taken
  to hold one paragraph (or sentence) per line, as BookCorpus' own text files do;
- a Parquet file is either one row per book or one row per line. It is row-per-book when the
  median length of its first rows is at least BOOK_ROW_MIN_CHARS characters (a book runs to tens
  of thousands), row-per-line otherwise (BookCorpus as published on the Hugging Face hub: 74M
  sentences, no book id). Row-per-line files are grouped into books by a book-id column when
  there is one (BOOK_ID_COLUMNS); otherwise a book ends at a blank row or after
  LINES_PER_DOCUMENT rows, whichever comes first — the published corpus has lost its book
  boundaries, and fixed-size documents keep next-sentence pairs within one stretch of one story.

The files are formatted in parallel (bert.parallel), in tasks of consecutive .txt files of about
PART_BYTES or of one Parquet file; each task writes its own parts of the table, named by the task's
place in the file list (`part-<task>-<n>.parquet`), so the table is in file order and the same
bytes whatever the number of workers.
"""

import logging
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.corpus.documents import PART_BYTES, DocumentWriter
from bert.corpus.downloads import downloaded_files
from bert.errors import UserError
from bert.parallel import run_tasks

log = logging.getLogger(__name__)

BOOK_ROW_MIN_CHARS = 2000
LINES_PER_DOCUMENT = 1000
BOOK_ID_COLUMNS = ("book_id", "book", "title")
SAMPLE_ROWS = 1000


def txt_paragraphs(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines()]
    if "" not in lines:
        return [line for line in lines if line]
    paragraphs, current = [], []
    for line in lines + [""]:
        if line:
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    return paragraphs


def read_txt_book(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UserError(
            f"{path}: not valid UTF-8 at byte {error.start} (line {line}); convert the file to UTF-8"
        ) from None
    return "\n".join(txt_paragraphs(text.lstrip("\ufeff")))


def _text_column_check(path: Path, parquet: pq.ParquetFile) -> None:
    names = parquet.schema_arrow.names
    if "text" not in names:
        raise UserError(
            f"{path}: has no `text` column (columns: {', '.join(names) or 'none'}); BookCorpus Parquet files need one"
        )
    kind = parquet.schema_arrow.field("text").type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)):
        raise UserError(
            f"{path}: the `text` column holds {kind}, not strings; store the text as UTF-8 strings"
        )


def _row_group_batches(path: Path, parquet: pq.ParquetFile, columns: list[str], batch_size: int) -> Iterator:
    """The file's record batches, row group by row group, so that a corrupt page (pyarrow raises
    OSError or ArrowInvalid when it fails to decompress or decode it) is named by its row group."""
    for row_group in range(parquet.num_row_groups):
        try:
            yield from parquet.iter_batches(batch_size=batch_size, row_groups=[row_group], columns=columns)
        except (OSError, pa.ArrowInvalid) as error:
            raise UserError(
                f"{path}: row group {row_group} of {parquet.num_row_groups} cannot be read ({error}); "
                "the file is corrupt: download or write it again"
            ) from None


def is_row_per_book(path: Path, parquet: pq.ParquetFile) -> bool:
    sample: list[str] = []  # the first SAMPLE_ROWS rows, whatever the row groups
    for batch in _row_group_batches(path, parquet, ["text"], SAMPLE_ROWS):
        sample += [value or "" for value in batch.column("text").to_pylist()[: SAMPLE_ROWS - len(sample)]]
        if len(sample) == SAMPLE_ROWS:
            break
    return bool(sample) and statistics.median(len(value) for value in sample) >= BOOK_ROW_MIN_CHARS


def parquet_books(path: Path) -> Iterator[tuple[str, str, str]]:
    """(book key, title, text) for every book in one Parquet file."""
    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: not a readable Parquet file ({error})") from None
    _text_column_check(path, parquet)
    names = parquet.schema_arrow.names
    book_id_column = next((name for name in BOOK_ID_COLUMNS if name in names), None)
    columns = ["text"] + ([book_id_column] if book_id_column else [])
    per_book = is_row_per_book(path, parquet)
    log.info(
        "%s: %d rows, one %s per row%s", path.name, parquet.metadata.num_rows, "book" if per_book else "line",
        f", books by `{book_id_column}`" if book_id_column and not per_book else "",
    )  # fmt: skip
    row = 0
    lines: list[str] = []
    current_id = start_row = None
    for batch in _row_group_batches(path, parquet, columns, 8192):
        texts = batch.column("text").to_pylist()
        ids = batch.column(book_id_column).to_pylist() if book_id_column else [None] * len(texts)
        for text, book_id in zip(texts, ids):
            text = text or ""
            if per_book:
                title = str(book_id) if book_id is not None else f"{path.stem} #{row}"
                yield str(row), title, "\n".join(txt_paragraphs(text))
            else:
                line = " ".join(text.split())
                if book_id_column:
                    boundary = book_id != current_id
                else:
                    boundary = not line or len(lines) >= LINES_PER_DOCUMENT
                if boundary and lines:
                    yield str(start_row), _line_book_title(path, current_id, start_row), "\n".join(lines)
                    lines = []
                if line:
                    if not lines:
                        current_id, start_row = book_id, row
                    lines.append(line)
            row += 1
    if lines:
        yield str(start_row), _line_book_title(path, current_id, start_row), "\n".join(lines)


def _line_book_title(path: Path, book_id, start_row: int) -> str:
    return str(book_id) if book_id is not None else f"{path.stem} from line {start_row}"


def find_book_files(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    files = downloaded_files(folder).file_paths()  # never a FIFO or a link out of it
    books = [p for p in files if p.suffix in (".txt", ".parquet")]
    if not books:
        raise UserError(f"{folder}: no .txt books or .parquet files in this folder")
    return books


def book_tasks(files: list[Path]) -> list[list[Path]]:
    """The files in order, cut into tasks: runs of .txt files of about PART_BYTES (one part each),
    and each Parquet file alone (its books follow from its rows in order)."""
    tasks: list[list[Path]] = []
    size = 0
    for path in files:
        if path.suffix == ".parquet" or not tasks or tasks[-1][0].suffix == ".parquet" or size >= PART_BYTES:
            tasks.append([])
            size = 0
        tasks[-1].append(path)
        size += path.stat().st_size
    return tasks


def _format_task(paths: list[str], root: str, folder: str, name: str, corpus: str) -> tuple[int, int]:
    """The books of `paths` (ids relative to `root`) into the parts `name-*` of the table `folder`:
    (documents written, empty books skipped)."""
    skipped_empty = 0
    with DocumentWriter(Path(folder), name=name) as writer:
        for path in map(Path, paths):
            file_name = path.relative_to(root).with_suffix("").as_posix()
            books = [("", path.stem, read_txt_book(path))] if path.suffix == ".txt" else parquet_books(path)
            for key, title, text in books:
                if not text.strip():
                    skipped_empty += 1
                    continue
                writer.add(corpus, f"{corpus}:{file_name}" + (f":{key}" if key else ""), title, text)
    return writer.documents, skipped_empty


@dataclass
class BookStats:
    files: int = 0
    documents: int = 0
    skipped_empty: int = 0

    def metrics(self) -> dict:
        return {"files": self.files, "documents": self.documents, "skipped_empty": self.skipped_empty}


def format_books(
    input_path: str | Path, out_dir: str | Path, corpus: str, compute: Compute | int
) -> BookStats:
    """Write every book under `input_path` as one document of the table `out_dir` (atomically),
    with ids `<corpus>:<file>[:<book>]`. (Each kind of corpus has an extractor of this signature:
    `extract_wikipedia`.)"""
    input_path = Path(input_path)
    files = find_book_files(input_path)
    root = input_path if input_path.is_dir() else input_path.parent
    with atomic_folder(out_dir) as tmp_dir:
        tasks = [
            ([str(path) for path in paths], str(root), str(tmp_dir), f"part-{number:05d}", corpus)
            for number, paths in enumerate(book_tasks(files))
        ]
        results = run_tasks(_format_task, tasks, compute, "books", describe=_describe_task)
        documents = sum(found for found, _ in results)
        skipped_empty = sum(empty for _, empty in results)
        if documents == 0:
            raise UserError(f"{input_path}: the books contain no text; nothing to format")
    log.info("%d books from %d files (%d empty skipped)", documents, len(files), skipped_empty)
    return BookStats(len(files), documents, skipped_empty)


def _describe_task(task: tuple) -> str:
    paths = task[0]
    return paths[0] if len(paths) == 1 else f"{paths[0]} to {paths[-1]}"
