"""The bad-input catalogue (issue 19): each row puts one bad input into a throw-away project folder,
runs the real stage command on it, and checks what the docs promise: the expected exit status, one
line on stderr starting `error:` that names the file and says what is wrong, no traceback, and
nothing published. For the rows with a `fix`, the input is then repaired and the same command must
succeed."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from bert.modeling import BertConfig, BertForQuestionAnswering
from tests.shard_fixtures import VOCAB, write_vocab
from tests.stage_workspace import run_stage, set_params, write_params
from tests.test_multistream import offsets, rewrite_index, small_wiki
from tests.test_wikipedia import PAGES, write_dump

WIKI_DUMP = "data/raw/wikipedia/dump.xml"
MULTISTREAM_DUMP = "data/raw/wikipedia/testwiki-pages-articles-multistream.xml.bz2"
MULTISTREAM_INDEX = "data/raw/wikipedia/testwiki-pages-articles-multistream-index.txt.bz2"
BOOKS = Path("data/raw/bookcorpus")


# ---- inputs -------------------------------------------------------------------------------------


def dump_with_ns(ns_text: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        xml = write_dump(root / WIKI_DUMP).read_text(encoding="utf-8")
        (root / WIKI_DUMP).write_text(xml.replace("<ns>0</ns>", f"<ns>{ns_text}</ns>", 1), encoding="utf-8")

    return build


def good_dump(root: Path) -> None:
    write_dump(root / WIKI_DUMP)


def latin1_dump(root: Path) -> None:
    xml = write_dump(root / WIKI_DUMP).read_text(encoding="utf-8")
    (root / WIKI_DUMP).write_bytes(xml.encode("latin-1"))  # "Zoë" as one byte 0xEB, no encoding declared


def html_dump(root: Path) -> None:
    """What a web server sends instead of the dump: an error page."""
    (root / WIKI_DUMP).parent.mkdir(parents=True)
    (root / WIKI_DUMP).write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=utf-8><title>404 Not Found</title></head>\n"
        "<body><h1>Not Found</h1><p>The requested URL was not found.<br></p></body></html>\n"
    )


def empty_dump_folder(root: Path) -> None:
    (root / "data/raw/wikipedia").mkdir(parents=True)
    (root / "data/raw/wikipedia/README.txt").write_text("the dump goes here\n")


def good_multistream(root: Path) -> None:
    small_wiki(root / "data/raw/wikipedia")


def truncated_multistream(root: Path) -> None:
    """Cut inside its last stream of pages."""
    dump, index = small_wiki(root / "data/raw/wikipedia")
    dump.write_bytes(dump.read_bytes()[: offsets(index)[-1] + 100])


def multistream_with_stale_offset(root: Path) -> None:
    """The index puts the third stream 3 bytes after where it starts."""
    dump, index = small_wiki(root / "data/raw/wikipedia")
    third = offsets(index)[2]
    rewrite_index(index, lambda line: line.replace(f"{third}:", f"{third + 3}:", 1))


def multistream_with_stale_ids(root: Path) -> None:
    dump, index = small_wiki(root / "data/raw/wikipedia")
    rewrite_index(index, lambda line: line.replace(":5:", ":55:"))


def index_without_dump(root: Path) -> None:
    dump, index = small_wiki(root / "data/raw/wikipedia")
    dump.unlink()


def parquet_text(values, kind: pa.DataType) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        (root / BOOKS).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"text": pa.array(values, kind)}), root / BOOKS / "books.parquet")

    return build


def good_parquet(root: Path) -> None:
    parquet_text(["A line of a story.", "Another line."], pa.string())(root)


def corrupt_zstd_parquet(root: Path) -> None:
    """Three row groups of zstd-compressed text; the compressed data of row group 1 is overwritten."""
    (root / BOOKS).mkdir(parents=True)
    path = root / BOOKS / "books.parquet"
    table = pa.table({"text": [f"line {i} of a story about a harbour." for i in range(3000)]})
    pq.write_table(table, path, compression="zstd", row_group_size=1000, use_dictionary=False)
    column = pq.ParquetFile(path).metadata.row_group(1).column(0)
    data = bytearray(path.read_bytes())
    frame = data.index(bytes.fromhex("28b52ffd"), column.data_page_offset)  # the zstd frame's magic number
    data[frame + 4 : frame + 24] = bytes(b ^ 0x5A for b in data[frame + 4 : frame + 24])
    path.write_bytes(data)


def blank_txt_books(root: Path) -> None:
    (root / BOOKS).mkdir(parents=True)
    for name in ("one.txt", "two.txt"):
        (root / BOOKS / name).write_text("\n  \n\n", encoding="utf-8")


def latin1_txt_book(root: Path) -> None:
    (root / BOOKS).mkdir(parents=True)
    (root / BOOKS / "story.txt").write_bytes("Once upon a time.\nSkål!\n".encode("latin-1"))


def squad_json(
    qas: list, version: str | None = "1.1", context: str = "The harbour was dredged in 1850."
) -> dict:
    dataset = {"data": [{"title": "Harbour", "paragraphs": [{"context": context, "qas": qas}]}]}
    return dataset if version is None else {"version": version, **dataset}


QUESTION = {
    "id": "q1",
    "question": "When was the harbour dredged?",
    "answers": [{"text": "1850", "answer_start": 27}],
}
UNANSWERABLE = {"id": "q2", "question": "Who dredged it?", "answers": [], "is_impossible": True,
                "plausible_answers": [{"text": "The harbour", "answer_start": 0}]}  # fmt: skip


def write_json(root: Path, relative: str, data) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(json.dumps(data), encoding="utf-8")


def squad_source(data) -> Callable[[Path], None]:
    """squad.sources.v1.1 pointing at local train/dev files; the train file holds `data`."""

    def build(root: Path) -> None:
        write_json(root, "sources/train.json", data)
        write_json(root, "sources/dev.json", squad_json([QUESTION]))
        set_params(root, {"squad.sources": {"v1.1": {"train": "sources/train.json", "dev": "sources/dev.json"},
                                            "v2.0": {"train": "sources/train.json", "dev": "sources/dev.json"}}})  # fmt: skip

    return build


def finetune_project(train) -> Callable[[Path], None]:
    """A tiny random BERT as data/weights/phase2 and `train` as data/squad/train.json."""

    def build(root: Path) -> None:
        set_params(root, {"finetune.init": "phase2", "finetune.epochs": 1, "finetune.global_batch_size": 2, "finetune.micro_batch_size": 2,
                          "squad.max_seq_length": 32, "squad.doc_stride": 16, "squad.max_query_length": 8})  # fmt: skip
        write_json(root, "data/squad/train.json", train)
        torch.manual_seed(0)
        config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=32)  # fmt: skip
        vocab = write_vocab(root / "vocab.txt")
        BertForQuestionAnswering(config).save_pretrained(root / "data/weights/phase2", vocab_file=vocab)

    return build


def predict_project(dev) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        finetune_project(squad_json([QUESTION]))(root)
        (root / "data/models").mkdir(parents=True)
        (root / "data/weights/phase2").rename(root / "data/models/squad")
        write_json(root, "data/squad/dev.json", dev)

    return build


def evaluation_inputs(dev, predictions) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        write_json(root, "data/squad/dev.json", dev)
        write_json(root, "data/predictions/predictions.json", predictions)

    return build


# ---- the catalogue ------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    command: tuple[str, ...]
    build: Callable[[Path], None]
    words: tuple[str, ...]  # the error line holds each of them
    published: str  # what the command would write: absent after the failure
    fix: Callable[[Path], None] | None = None  # repairs the input; then the command succeeds
    exit_code: int = 1


WIKIPEDIA = ("stages.documents", "wikipedia")
BOOKCORPUS = ("stages.documents", "bookcorpus")
DOWNLOAD_SQUAD = ("stages.download_squad",)
FINETUNE = ("stages.finetune_squad",)
PREDICT = ("stages.predict_squad",)
EVALUATE = ("stages.evaluate_squad",)
OFFICIAL_EVALUATION = (
    "bert.squad",
    "data/squad/dev.json",
    "data/predictions/predictions.json",
    "-o",
    "out.json",
)

CASES = [
    # Wikipedia dumps
    Case("wiki-ns-word", WIKIPEDIA, dump_with_ns("zero"), (WIKI_DUMP, "Zoë Quill", "<ns>zero</ns>", "namespace number"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-ns-empty", WIKIPEDIA, dump_with_ns(""), (WIKI_DUMP, "<ns></ns>", "not a namespace number"),
         "data/documents/wikipedia"),
    Case("wiki-not-utf8", WIKIPEDIA, latin1_dump, (WIKI_DUMP, "malformed XML at line", "not UTF-8"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-html-page", WIKIPEDIA, html_dump, (WIKI_DUMP, "an HTML page, not a MediaWiki XML export"), "data/documents/wikipedia"),
    Case("wiki-no-dump", WIKIPEDIA, empty_dump_folder, ("data/raw/wikipedia", "no Wikipedia dump"),
         "data/documents/wikipedia"),
    Case("wiki-multistream-truncated", WIKIPEDIA, truncated_multistream,
         (MULTISTREAM_DUMP, "the bz2 stream at byte offset", "is truncated"), "data/documents/wikipedia", fix=good_multistream),
    Case("wiki-multistream-stale-offset", WIKIPEDIA, multistream_with_stale_offset,
         (MULTISTREAM_DUMP, "the bz2 stream at byte offset", "where its index says the next stream starts", "stale"),
         "data/documents/wikipedia", fix=good_multistream),
    Case("wiki-multistream-stale-ids", WIKIPEDIA, multistream_with_stale_ids,
         (MULTISTREAM_DUMP, "at byte offset", "holds page id 5", "lists page id 55", "stale"), "data/documents/wikipedia"),
    Case("wiki-index-without-dump", WIKIPEDIA, index_without_dump,
         (MULTISTREAM_INDEX, "a multistream index without its dump"), "data/documents/wikipedia", fix=good_multistream),
    # Books: .txt and Parquet
    Case("parquet-int-text", BOOKCORPUS, parquet_text([1, 2], pa.int64()), ("books.parquet", "`text` column holds int64"),
         "data/documents/bookcorpus", fix=good_parquet),
    Case("parquet-binary-text", BOOKCORPUS, parquet_text([b"a", b"b"], pa.binary()), ("books.parquet", "holds binary"),
         "data/documents/bookcorpus"),
    Case("parquet-list-text", BOOKCORPUS, parquet_text([["a"], ["b"]], pa.list_(pa.string())),
         ("books.parquet", "holds list<", "not strings"), "data/documents/bookcorpus"),
    Case("parquet-corrupt-zstd", BOOKCORPUS, corrupt_zstd_parquet, ("books.parquet", "row group 1 of 3", "corrupt"),
         "data/documents/bookcorpus", fix=good_parquet),
    Case("txt-all-blank", BOOKCORPUS, blank_txt_books, ("data/raw/bookcorpus", "contain no text"),
         "data/documents/bookcorpus"),
    Case("txt-not-utf8", BOOKCORPUS, latin1_txt_book, ("story.txt", "not valid UTF-8", "line 2"),
         "data/documents/bookcorpus"),
    # SQuAD: download_squad checks the version of what it fetches
    # (no re-run here: a fixed source is only fetched again once a staged download is checked against its source)
    Case("squad-json-list", DOWNLOAD_SQUAD, squad_source([QUESTION]), ("sources/train.json", "not a SQuAD JSON file", "list"),
         "data/squad"),
    Case("squad-v2-for-v1", DOWNLOAD_SQUAD, squad_source(squad_json([QUESTION], "v2.0")),
         ("sources/train.json", "'v2.0' in the file", "squad.version is 'v1.1'"), "data/squad"),
    # SQuAD: finetune_squad / predict_squad read the questions
    Case("squad-no-questions", FINETUNE, finetune_project(squad_json([QUESTION]) | {"data": []}),
         ("data/squad/train.json", "has no questions"), "data/models/squad"),
    Case("squad-question-null", FINETUNE, finetune_project(squad_json([QUESTION | {"question": None}])),
         ("data/squad/train.json", "question q1", "'question' is None"), "data/models/squad"),
    Case("squad-unanswerable-in-v1", FINETUNE, finetune_project(squad_json([QUESTION, UNANSWERABLE])),
         ("data/squad/train.json", "question q2 is unanswerable", "version '1.1'", "v2.0"), "data/models/squad"),
    Case("squad-answer-past-context", FINETUNE,
         finetune_project(squad_json([QUESTION | {"answers": [{"text": "1850", "answer_start": 400}]}])),
         ("data/squad/train.json", "question q1", "not at answer_start 400"), "data/models/squad"),
    Case("squad-duplicate-ids", PREDICT, predict_project(squad_json([QUESTION, QUESTION])),
         ("data/squad/dev.json", "question id 'q1' occurs twice"), "data/predictions"),
    # SQuAD: the official evaluation, as a stage and as `python -m bert.squad`
    Case("eval-v2-labelled-v1", EVALUATE, evaluation_inputs(squad_json([QUESTION, UNANSWERABLE]), {"q1": "1850", "q2": ""}),
         ("data/squad/dev.json", "question q2 has no answers", "version '1.1'"), "metrics/squad.json"),
    Case("eval-predictions-list", EVALUATE, evaluation_inputs(squad_json([QUESTION]), ["1850"]),
         ("data/predictions/predictions.json", "expected a JSON object"), "metrics/squad.json",
         fix=evaluation_inputs(squad_json([QUESTION]), {"q1": "1850"})),
    Case("official-eval-v2-labelled-v1", OFFICIAL_EVALUATION,
         evaluation_inputs(squad_json([QUESTION, UNANSWERABLE]), {"q1": "1850", "q2": ""}),
         ("data/squad/dev.json", "question q2 has no answers"), "out.json",
         fix=evaluation_inputs(squad_json([QUESTION, UNANSWERABLE], "v2.0"), {"q1": "1850", "q2": ""})),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_one_line_and_publishes_nothing(tmp_path, case):
    write_params(tmp_path)
    case.build(tmp_path)
    result = run_stage(tmp_path, *case.command, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case.exit_code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for word in case.words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"
    assert not (tmp_path / case.published).exists()
    if case.fix:
        case.fix(tmp_path)
        result = run_stage(tmp_path, *case.command, timeout=120)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / case.published).exists()


def test_v1_file_without_version_is_v1(tmp_path):
    """SQuAD's own v1.1 files say "version": "1.1", other files in its format often say nothing."""
    write_params(tmp_path)
    squad_source(squad_json([QUESTION], version=None))(tmp_path)
    result = run_stage(tmp_path, *DOWNLOAD_SQUAD)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "data/squad/train.json").read_text()) == squad_json(
        [QUESTION], version=None
    )


def template_bomb(levels: int, calls: int) -> list[tuple]:
    """Template:T<k> calls T<k-1> `calls` times: {{T<levels>}} makes calls**levels expansions."""
    templates = [(100, "Template:T0", "word ", 10, None)]
    templates += [
        (100 + k, f"Template:T{k}", f"{{{{T{k - 1}}}}}" * calls, 10, None) for k in range(1, levels + 1)
    ]
    return templates + [(200, "Bomb", f"'''Bomb''' is an article. {{{{T{levels}}}}} The end.", 0, None)]


def test_template_expansion_has_a_budget(tmp_path):
    """9 chained templates that each call the next 10 times (10^9 expansions) would run for days: the
    page is skipped after its budget of expansions, counted as `template_budget` in the metrics,
    and the output is the same with one worker process or two."""
    write_params(tmp_path)
    dump = tmp_path / "data/raw/wikipedia/dump.xml.bz2"
    write_dump(dump, PAGES + template_bomb(levels=9, calls=10))
    tables = []
    for processes in (1, 2):
        set_params(tmp_path, {"extract.processes": processes})
        result = run_stage(tmp_path, *WIKIPEDIA, timeout=120)
        assert result.returncode == 0, result.stderr
        metrics = json.loads((tmp_path / "metrics/documents_wikipedia.json").read_text())
        assert metrics["skipped"]["template_budget"] == 1 and metrics["documents"] == 2
        assert "page 200 ('Bomb') skipped" in result.stderr
        tables.append(pq.read_table(tmp_path / "data/documents/wikipedia").to_pylist())
    assert tables[0] == tables[1]
    assert [row["title"] for row in tables[0]] == ["Zoë Quill", "Harbour"]
