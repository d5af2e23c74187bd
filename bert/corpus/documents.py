"""The document table every corpus is turned into, and atomic output folders.

A document table is a folder of Parquet part files (`part-00000.parquet`, ...) with the columns
`corpus, doc_id, title, text`, where `text` holds the paragraphs of one document separated by
"\n". `extract_wikipedia` and `format_books` write it; `shard` reads it.
"""

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bert.errors import UserError, is_disk_full

DOCUMENT_SCHEMA = pa.schema(
    [("corpus", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("text", pa.string())]
)
PART_BYTES = 128 * 2**20  # text per part file; keeps files a convenient size for real corpora
ROW_GROUP_ROWS = 1024


@contextlib.contextmanager
def atomic_folder(out_dir: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder next to `out_dir`; on success it replaces `out_dir`.

    On any error the temporary folder is removed and an existing `out_dir` is left untouched, so
    a failed or interrupted stage never leaves half-written output behind.
    """
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        _clear_interrupted(out_dir)
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    except OSError as error:
        raise UserError(
            f"{out_dir}: cannot write the output folder ({error.strerror}: {error.filename}); "
            "check that the path is a writable folder"
        ) from None
    try:
        yield tmp_dir
        old = None
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            os.replace(out_dir, old)
        os.replace(tmp_dir, out_dir)
        if old is not None:
            shutil.rmtree(old)
    except Exception as error:
        if isinstance(error, UserError) or not is_disk_full(error):
            raise
        raise UserError(
            f"{out_dir}: disk full while writing it ({error}); the previous {out_dir.name} is "
            f"untouched. Free space on {out_dir.parent.resolve()} and run the stage again"
        ) from None
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _clear_interrupted(out_dir: Path) -> None:
    """Clean up after a run of atomic_folder that was killed: remove its temporary folder and put
    back the previous output if it was killed between moving that aside and renaming the new one."""
    for old in sorted(out_dir.parent.glob(f".{out_dir.name}.old-*")):
        if out_dir.exists():
            shutil.rmtree(old)
        else:
            os.replace(old, out_dir)
    for tmp in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        shutil.rmtree(tmp)


def write_file_atomically(path: str | Path, data: str) -> None:
    """Write text to `path` through a temporary file in the same folder, then rename it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write ({error.strerror})") from None


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
