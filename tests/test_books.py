import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bert.corpus import books
from bert.corpus.books import format_books
from bert.errors import UserError
from tests.stage_workspace import write_params

REPO = Path(__file__).resolve().parents[1]


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
    stats = format_books(raw, tmp_path / "docs", "bookcorpus")
    docs = documents(tmp_path / "docs")
    assert [d["doc_id"] for d in docs] == ["bookcorpus:shelf/lines", "bookcorpus:wrapped"]
    assert docs[0]["text"] == "Ærø is an island.\nSkål!"
    assert docs[1]["text"] == "Chapter One\nIt was a dark and stormy night.\nThe end."
    assert {d["corpus"] for d in docs} == {"bookcorpus"} and stats["documents"] == 2


def test_parquet_row_per_book(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    book = "A long book sentence.\n\n" * 200
    pq.write_table(pa.table({"text": [book, book.upper(), ""]}), raw / "books.parquet")
    format_books(raw, tmp_path / "docs", "bookcorpus")
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
    format_books(raw, tmp_path / "docs", "bookcorpus")
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
    format_books(raw, tmp_path / "docs", "bookcorpus")
    docs = documents(tmp_path / "docs")
    assert [(d["title"], d["text"]) for d in docs] == [("b1", "One.\nTwo."), ("b2", "Three.\nFour.\nFive.")]


def expect_error(tmp_path, raw: Path, *fragments: str) -> None:
    with pytest.raises(UserError) as error:
        format_books(raw, tmp_path / "out" / "docs", "bookcorpus")
    for fragment in fragments:
        assert fragment in str(error.value)
    assert not (tmp_path / "out" / "docs").exists()


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
