"""The document table every corpus is turned into.

A document table is a folder of Parquet part files (`part-00000.parquet`, ...) with the columns
`corpus, doc_id, title, text`, where `text` holds the paragraphs of one document separated by
"\n". `extract_wikipedia` and `format_books` write it; `shard` reads it.
"""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.errors import UserError

DOCUMENT_SCHEMA = pa.schema(
    [("corpus", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())]
)
PART_BYTES = 128 * 2**20  # text per part file; keeps files a convenient size for real corpora
ROW_GROUP_ROWS = 1024


class DocumentWriter:
    """Appends documents to part files in a folder, starting a new part every PART_BYTES of text."""

    def __init__(self, folder: Path, part_bytes: int = PART_BYTES):
        self.folder = Path(folder)
        self.part_bytes = part_bytes
        self.parts = 0
        self.documents = 0
        self._writer: pq.ParquetWriter | None = None
        self._part_size = 0
        self._rows: dict[str, list[str]] = {name: [] for name in DOCUMENT_SCHEMA.names}

    def add(self, corpus: str, doc_id: str, title: str, text: str) -> None:
        for name, value in zip(DOCUMENT_SCHEMA.names, (corpus, doc_id, title, text)):
            self._rows[name].append(value)
        self.documents += 1
        self._part_size += len(text)
        if len(self._rows["text"]) >= ROW_GROUP_ROWS:
            self._flush()
        if self._part_size >= self.part_bytes:
            self._close_part()

    def close(self) -> None:
        self._close_part()

    def _flush(self) -> None:
        if not self._rows["text"]:
            return
        if self._writer is None:
            path = self.folder / f"part-{self.parts:05d}.parquet"
            self._writer = pq.ParquetWriter(path, DOCUMENT_SCHEMA, compression="zstd")
            self.parts += 1
        self._writer.write_table(pa.table(self._rows, schema=DOCUMENT_SCHEMA))
        self._rows = {name: [] for name in DOCUMENT_SCHEMA.names}

    def _close_part(self) -> None:
        self._flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._part_size = 0


def document_files(folder: str | Path) -> list[Path]:
    """The part files of a document table, in order; a clear error when there are none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: not found; run the stage that writes it first")
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise UserError(f"{folder}: contains no .parquet document files")
    return files
