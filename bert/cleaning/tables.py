"""Document tables (bert.corpus.documents) cut into tasks, each read with
bert.corpus.documents.read_rows, and their cleaned copies written.

A task is a run of at most TASK_DOCUMENTS rows of one part file, fixed by the table's Parquet
metadata alone (never by the number of workers), so every pass lists the same tasks. Documents
are numbered across all corpora in corpus order, then table order: that *ordinal* names a
document in every spill file and decides which copy of a duplicate is kept.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.atomic import task_file
from bert.corpus.documents import DOCUMENT_SCHEMA, ROW_GROUP_ROWS, document_files, open_document_table

TASK_DOCUMENTS = 1024


@dataclass(frozen=True)
class Chunk:
    """Rows [start, end) of one part file of corpus number `corpus`; its first document's ordinal."""

    corpus: int
    path: str
    start: int
    end: int
    first: int

    def describe(self) -> str:
        return f"documents {self.start} to {self.end - 1} of {self.path}"


def list_chunks(folders: list[Path]) -> list[Chunk]:
    """Every task's rows, over the corpora's tables in order, from their metadata alone."""
    chunks, ordinal = [], 0
    for corpus, folder in enumerate(folders):
        for path in document_files(folder):
            rows = open_document_table(path).metadata.num_rows
            for start in range(0, rows, TASK_DOCUMENTS):
                end = min(start + TASK_DOCUMENTS, rows)
                chunks.append(Chunk(corpus, str(path), start, end, ordinal))
                ordinal += end - start
    return chunks


def iter_part_rows(path: str) -> Iterator[pa.Table]:
    """A part file's rows, a row group at a time (memory: one row group)."""
    parquet = open_document_table(path)
    for group in range(parquet.metadata.num_row_groups):
        yield parquet.read_row_group(group)


def write_kept(
    path: str, out_file: str, removed: list[int], strip: Callable[[str], str] | None = None
) -> tuple[int, int]:
    """Copy part file `path` to `out_file` without the rows `removed` (row numbers in the file),
    row group by row group, in the document table's schema, each text through `strip` when given
    (boilerplate lines out); no file when no row is kept. Returns (documents, UTF-8 bytes of text)
    written."""
    removed_rows = set(removed)
    documents = size = 0
    first = 0
    writer = None
    with task_file(Path(out_file)) as building:
        try:
            for table in iter_part_rows(path):
                keep = [first + row not in removed_rows for row in range(table.num_rows)]
                first += table.num_rows
                kept = table.select(DOCUMENT_SCHEMA.names).cast(DOCUMENT_SCHEMA).filter(pa.array(keep))
                if kept.num_rows == 0:
                    continue
                if strip is not None:
                    texts = pa.array(
                        [strip(text or "") for text in kept.column("text").to_pylist()], pa.string()
                    )
                    kept = kept.set_column(DOCUMENT_SCHEMA.get_field_index("text"), "text", texts)
                if writer is None:
                    writer = pq.ParquetWriter(building, DOCUMENT_SCHEMA, compression="zstd")
                writer.write_table(kept, row_group_size=ROW_GROUP_ROWS)
                documents += kept.num_rows
                size += sum(len(text.encode("utf-8")) for text in kept.column("text").to_pylist())
        finally:
            if writer is not None:
                writer.close()
    if documents == 0:
        Path(out_file).unlink(missing_ok=True)
    return documents, size
