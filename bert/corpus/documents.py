"""The document table every corpus is turned into.

A document table is a folder of Parquet part files with the columns `corpus, doc_id, title, text`,
where `text` holds the paragraphs of one document separated by "\n"; the table's order is the
files' name order (document_files), then row order. `extract_wikipedia` and `format_books` write
it from their tasks, each task its own parts named by its place in the input
(`part-<dump>-<range>-<n>.parquet`, `part-<task>-<n>.parquet`); `clean` and `shard` read it in
tasks of a run of rows each (read_rows).
"""

import contextlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.atomic import temporary_file
from bert.errors import UserError

DOCUMENT_SCHEMA = pa.schema(
    [("corpus", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())]
)
PART_BYTES = 128 * 2**20  # text per part file; keeps files a convenient size for real corpora
# A row group ends at whichever comes first: a reader holds one at a time, and a row group of
# books (~0.5 MB each) would otherwise hold hundreds of MB.
ROW_GROUP_ROWS = 1024
ROW_GROUP_BYTES = 2 * 2**20  # characters of text


class DocumentWriter:
    """Appends documents to part files `<name>-00000.parquet`, `<name>-00001.parquet`, ... in a
    folder, starting a new part every `part_bytes` of text. Each part is written under a temporary
    name (bert.atomic) and renamed into place when complete, so a task that dies and runs again
    leaves one whole part, never a partial one. No documents: no file. As a context manager it
    closes on success and removes the part being written on an error."""

    def __init__(self, folder: Path, part_bytes: int = PART_BYTES, name: str = "part"):
        self.folder = Path(folder)
        self.part_bytes = part_bytes
        self.name = name
        self.parts = 0
        self.documents = 0
        self._writer: pq.ParquetWriter | None = None
        self._path = self._temporary = None
        self._part_size = self._row_group_size = 0
        self._rows: dict[str, list[str]] = {name: [] for name in DOCUMENT_SCHEMA.names}

    def __enter__(self) -> "DocumentWriter":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self.close()
        elif self._writer is not None:
            with contextlib.suppress(Exception):  # the error that got here is the one to report
                self._writer.close()
            self._temporary.unlink(missing_ok=True)

    def add(self, corpus: str, doc_id: str, title: str, text: str) -> None:
        for name, value in zip(DOCUMENT_SCHEMA.names, (corpus, doc_id, title, text)):
            self._rows[name].append(value)
        self.documents += 1
        self._part_size += len(text)
        self._row_group_size += len(text)
        if len(self._rows["text"]) >= ROW_GROUP_ROWS or self._row_group_size >= ROW_GROUP_BYTES:
            self._flush()
        if self._part_size >= self.part_bytes:
            self._close_part()

    def close(self) -> None:
        self._close_part()

    def _flush(self) -> None:
        self._row_group_size = 0
        if not self._rows["text"]:
            return
        if self._writer is None:
            self._path = self.folder / f"{self.name}-{self.parts:05d}.parquet"
            self._temporary = temporary_file(self._path)
            self._writer = pq.ParquetWriter(self._temporary, DOCUMENT_SCHEMA, compression="zstd")
            self.parts += 1
        self._writer.write_table(pa.table(self._rows, schema=DOCUMENT_SCHEMA))
        self._rows = {name: [] for name in DOCUMENT_SCHEMA.names}

    def _close_part(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            os.replace(self._temporary, self._path)
        self._part_size = 0


def open_document_table(path: Path | str) -> pq.ParquetFile:
    """A part file of a document table, checked: readable Parquet with `doc_id` and `text`."""
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowInvalid) as error:
        raise UserError(f"{path}: cannot read this Parquet file ({error})") from None
    missing = {"doc_id", "text"} - set(parquet.schema_arrow.names)
    if missing:
        raise UserError(f"{path}: missing column(s) {', '.join(sorted(missing))}; not a document table")
    return parquet


def read_rows(path: str, start: int, end: int, columns: list[str]) -> pa.Table:
    """`columns` of rows [start, end) of a part file, reading only the row groups that hold them."""
    try:
        parquet = open_document_table(path)
        groups, first, offset = [], 0, None
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if first < end and start < first + rows:
                groups.append(group)
                offset = first if offset is None else offset
            first += rows
        table = parquet.read_row_groups(groups, columns=columns)
    except (OSError, pa.ArrowInvalid) as error:
        raise UserError(f"{path}: cannot read this Parquet file ({error})") from None
    return table.slice(start - (offset or 0), end - start)


def document_files(folder: str | Path) -> list[Path]:
    """The part files of a document table, in order; a clear error when there are none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: not found; run the stage that writes it first")
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise UserError(f"{folder}: contains no .parquet document files")
    return files
