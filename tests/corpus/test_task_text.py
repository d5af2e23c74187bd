"""A fine-tuning task's files as a corpus (kind task): the named columns of each row (SQuAD: each
paragraph's context and questions) become documents; labels are never read; repeats are left out."""

import json

import pyarrow.parquet as pq
import pytest

from bert.corpus.task_text import format_task_text
from bert.errors import UserError


def documents(folder) -> list[dict]:
    return [row for path in sorted(folder.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


def test_the_named_columns_of_each_row_become_a_document(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.tsv").write_text(
        "index\tsentence1\tsentence2\tlabel\n"
        "0\tThe mill opened in 1568. It made paper.\tThe mill made paper.\tentailment\n"
        "1\tThe mill opened in 1568. It made paper.\tThe mill made paper.\tentailment\n"  # a repeat
        "2\tGreta was an astronomer.\tGreta made porcelain.\tnot_entailment\n"
        "3\t\t\tentailment\n",  # no text at all
        encoding="utf-8",
    )
    (raw / "notes.txt").write_text("not a task file")
    stats = format_task_text(raw, tmp_path / "docs", "rte_text", 1, ["sentence1", "sentence2"], {})
    assert stats.metrics() == {"files": 1, "documents": 2, "skipped_empty": 1, "skipped_repeated": 1}
    rows = documents(tmp_path / "docs")
    assert [row["text"] for row in rows if row["doc_id"].startswith("rte_text:train:")] == [
        "The mill opened in 1568. It made paper.\nThe mill made paper.",
        "Greta was an astronomer.\nGreta made porcelain.",
    ]
    assert rows[0]["doc_id"] == "rte_text:train:2" and not any("entailment" in row["text"] for row in rows)


def test_squad_contexts_and_questions(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    squad = {"data": [{"title": "Mill", "paragraphs": [
        {"context": "The mill opened in 1568.", "qas": [{"question": "When did the mill open?", "id": "q1"},
                                                        {"question": "What opened?", "id": "q2"}]},
        {"context": "It made paper.", "qas": []},
    ]}]}  # fmt: skip
    (raw / "train.json").write_text(json.dumps(squad), encoding="utf-8")
    format_task_text(raw, tmp_path / "docs", "squad_text", 1, ["context", "question"], {})
    assert [row["text"] for row in documents(tmp_path / "docs")] == [
        "The mill opened in 1568.\nWhen did the mill open?\nWhat opened?",
        "It made paper.",
    ]
    with pytest.raises(
        UserError,
        match="a SQuAD file has no column 'sentence1'; corpora.<corpus>.columns takes context and question",
    ):
        format_task_text(raw, tmp_path / "again", "squad_text", 1, ["sentence1"], {})


def test_a_column_the_header_lacks_is_one_line(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "in_domain_train.tsv").write_text(
        "gj04\t1\t\tOur friends won't buy this analysis.\n"
    )  # CoLA: no header
    with pytest.raises(UserError) as error:
        format_task_text(raw, tmp_path / "docs", "cola_text", 1, ["sentence"], {})
    assert str(error.value).startswith(f"{raw / 'in_domain_train.tsv'}: no column 'sentence' in its header")
    assert "\n" not in str(error.value) and not (tmp_path / "docs").exists()


@pytest.mark.parametrize(
    "data, where",
    [
        (["Harbour"], 'the file is ["Harbour"], not an object'),
        ({"data": {"title": "Mill"}}, 'data is {"title": "Mill"}, not a list'),
        ({"data": ["The mill opened in 1568."]}, 'data[0] is "The mill opened in 1568.", not an object'),
        ({"data": [{"paragraphs": "It made paper."}]}, 'data[0].paragraphs is "It made paper.", not a list'),
        ({"data": [{"paragraphs": [{"context": ["It made paper."]}]}]},
         'data[0].paragraphs[0].context is ["It made paper."], not text'),
        ({"data": [{"paragraphs": [{"context": "x", "qas": ["When?"]}]}]}, 'data[0].paragraphs[0].qas[0] is "When?"'),
    ],
)  # fmt: skip
def test_a_json_of_another_shape_is_one_line_naming_the_source_and_the_record(tmp_path, data, where):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.json").write_text(json.dumps(data), encoding="utf-8")
    origins = {"train.json": "sources/squad.json (corpora.squad_text.sources)"}
    with pytest.raises(UserError) as error:
        format_task_text(raw, tmp_path / "docs", "squad_text", 1, ["context", "question"], origins)
    assert str(error.value).startswith(f"sources/squad.json (corpora.squad_text.sources): {where}")
    assert '{"data": [{"paragraphs": [{"context": "...", "qas": [{"question": "..."}]}]}]}' in str(
        error.value
    )
    assert "\n" not in str(error.value) and not (tmp_path / "docs").exists()
