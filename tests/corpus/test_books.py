import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert.corpus import books
from bert.corpus.books import format_books
from bert.corpus.documents import ROW_GROUP_BYTES, ROW_GROUP_ROWS, DocumentWriter
from bert.errors import UserError
from tests.support.stage_workspace import write_params

REPO = Path(__file__).resolve().parents[2]


def documents(folder: Path) -> list[dict]:
    return pq.read_table(folder).to_pylist()


def test_txt_books_one_document_each(tmp_path):
    raw = tmp_path / "raw"
    (raw / "shelf").mkdir(parents=True)
    # Hard-wrapped paragraphs separated by blank lines are rejoined ...
    (raw / "wrapped.txt").write_text(
        "\ufeffChapter One\n\nIt was a dark\nand stormy night.\n\nThe end.\n", encoding="utf-8"
    )
    # ... and a file without blank lines keeps one paragraph per line.
    (raw / "shelf" / "lines.txt").write_text("Ærø is an island.\nSkål!\n", encoding="utf-8")
    stats = format_books(raw, tmp_path / "docs", "bookcorpus", 1)
    docs = documents(tmp_path / "docs")
    assert [d["doc_id"] for d in docs] == ["bookcorpus:shelf/lines", "bookcorpus:wrapped"]
    assert docs[0]["text"] == "Ærø is an island.\nSkål!"
    assert docs[1]["text"] == "Chapter One\nIt was a dark and stormy night.\nThe end."
    assert {d["corpus"] for d in docs} == {"bookcorpus"} and stats.documents == 2


def test_parquet_row_per_book(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    book = "A long book sentence.\n\n" * 200
    pq.write_table(pa.table({"text": [book, book.upper(), ""]}), raw / "books.parquet")
    format_books(raw, tmp_path / "docs", "bookcorpus", 1)
    docs = documents(tmp_path / "docs")
    assert [d["doc_id"] for d in docs] == [
        "bookcorpus:books:0",
        "bookcorpus:books:1",
    ]  # the empty row is skipped
    assert docs[0]["text"].split("\n") == ["A long book sentence."] * 200


def test_parquet_row_per_line_without_book_id(tmp_path, monkeypatch):
    monkeypatch.setattr(books, "LINES_PER_DOCUMENT", 4)
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = [f"line {i} ." for i in range(6)] + [""] + ["after  a   blank ."]
    pq.write_table(pa.table({"text": lines}), raw / "lines.parquet")
    format_books(raw, tmp_path / "docs", "bookcorpus", 1)
    docs = documents(tmp_path / "docs")
    assert [d["doc_id"] for d in docs] == ["bookcorpus:lines:0", "bookcorpus:lines:4", "bookcorpus:lines:7"]
    assert docs[0]["text"] == "line 0 .\nline 1 .\nline 2 .\nline 3 ."
    assert docs[1]["text"] == "line 4 .\nline 5 ."
    assert docs[2]["text"] == "after a blank ."


def test_parquet_row_per_line_grouped_by_book_id(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    table = pa.table(
        {"book_id": ["b1", "b1", "b2", "b2", "b2"], "text": ["One.", "Two.", "Three.", "Four.", "Five."]}
    )
    pq.write_table(table, raw / "ids.parquet")
    format_books(raw, tmp_path / "docs", "bookcorpus", 1)
    docs = documents(tmp_path / "docs")
    assert [(d["title"], d["text"]) for d in docs] == [("b1", "One.\nTwo."), ("b2", "Three.\nFour.\nFive.")]


def test_tasks_write_their_parts_in_file_order_whatever_the_workers(tmp_path, monkeypatch):
    """Runs of .txt files of about PART_BYTES and each Parquet file are tasks, each writing its own
    parts (rolled over at PART_BYTES): the same files, in file order, with one worker or two."""
    monkeypatch.setattr(books, "PART_BYTES", 60)
    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("a", "b", "c"):
        (raw / f"{name}.txt").write_text(f"Book {name}, a story of forty-two characters.", encoding="utf-8")
    pq.write_table(pa.table({"book_id": ["x", "y"], "text": ["One.", "Two."]}), raw / "d.parquet")
    (raw / "e.txt").write_text("The last book.", encoding="utf-8")
    stats = format_books(raw, tmp_path / "one", "bookcorpus", 1)
    format_books(raw, tmp_path / "two", "bookcorpus", 2)
    one = {p.name: p.read_bytes() for p in sorted((tmp_path / "one").iterdir())}
    assert one == {p.name: p.read_bytes() for p in sorted((tmp_path / "two").iterdir())}
    assert list(one) == [
        "part-00000-00000.parquet",  # a.txt and b.txt: 90 bytes, past PART_BYTES after b
        "part-00001-00000.parquet",  # c.txt
        "part-00002-00000.parquet",  # d.parquet
        "part-00003-00000.parquet",  # e.txt, after the Parquet file
    ]
    assert [d["doc_id"] for d in documents(tmp_path / "one")] == [
        "bookcorpus:a", "bookcorpus:b", "bookcorpus:c", "bookcorpus:d:0", "bookcorpus:d:1", "bookcorpus:e"
    ]  # fmt: skip
    assert stats.metrics() == {"files": 5, "documents": 6, "skipped_empty": 0}


def test_row_groups_are_bounded_by_bytes_of_text(tmp_path):
    """Books of 0.8 MB: a row group holds ROW_GROUP_BYTES of text (3 books), not ROW_GROUP_ROWS."""
    writer = DocumentWriter(tmp_path)
    for number in range(7):
        writer.add("bookcorpus", f"bookcorpus:{number}", f"Book {number}", f"{number} " * 400_000)
    writer.close()
    metadata = pq.ParquetFile(tmp_path / "part-00000.parquet").metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [3, 3, 1]
    assert 2 * 800_000 < ROW_GROUP_BYTES < 3 * 800_000 and ROW_GROUP_ROWS > 3


def expect_error(tmp_path, raw: Path, *fragments: str) -> None:
    with pytest.raises(UserError) as error:
        format_books(raw, tmp_path / "out" / "docs", "bookcorpus", 1)
    for fragment in fragments:
        assert fragment in str(error.value)
    assert not (tmp_path / "out" / "docs").exists()
    assert not list((tmp_path / "out").glob("*"))  # nor a temporary folder or part


def test_parquet_without_text_column(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(pa.table({"content": ["x"]}), raw / "wrong.parquet")
    expect_error(tmp_path, raw, "wrong.parquet: has no `text` column (columns: content)")


def test_invalid_utf8_names_file_and_line(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "latin1.txt").write_bytes(b"fine\nZo\xeb\n")
    expect_error(tmp_path, raw, "latin1.txt: not valid UTF-8 at byte 7 (line 2)")


def test_empty_corpus(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    expect_error(tmp_path, raw, "no .txt books or .parquet files")
    (raw / "blank.txt").write_text("\n\n", encoding="utf-8")
    expect_error(tmp_path, raw, "the books contain no text")


def test_stage_reports_missing_text_column_in_one_line(tmp_path):
    raw = tmp_path / "data" / "raw" / "bookcorpus"
    raw.mkdir(parents=True)
    pq.write_table(pa.table({"content": ["x"]}), raw / "wrong.parquet")
    write_params(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "stages.documents", "bookcorpus"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: data/raw/bookcorpus/wrong.parquet: has no `text` column (columns: content); BookCorpus Parquet files need one"
    )
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "documents" / "bookcorpus").exists()
