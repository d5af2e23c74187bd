"""The bad-input catalogue (issue 19): each row puts one bad input into a throw-away project folder,
runs the real stage command on it, and checks what the docs promise: the expected exit status,
one line on stderr starting `error:` that names the file and says what is wrong, no traceback, and
nothing published (and for bad params, that the stage stopped before any work: the line is all it
printed). Then the row's `fix` repairs the input as a
user would, in the same folder (so whatever the failed run left behind must not get in the way),
and the same command must succeed."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from safetensors.torch import load_file

import stages
from bert.corpus.documents import DocumentWriter
from bert.errors import UserError, run_main
from bert.model.config import BertConfig
from bert.model.hf import check_pretrained, read_weight_index
from bert.model.network import BertForQuestionAnswering, BertModel
from tests.corpus.test_multistream import offsets, rewrite_index, small_wiki
from tests.corpus.test_wikipedia import PAGES, write_dump
from tests.support.shard_fixtures import VOCAB, tiny_hf_folder, write_vocab
from tests.support.stage_workspace import (
    REPO,
    make_workspace,
    repo_params,
    run_stage,
    set_params,
    write_params,
)

WIKI_DUMP = "data/raw/wikipedia/dump.xml"
WIKI_DUMP_BZ2 = "data/raw/wikipedia/dump.xml.bz2"
MULTISTREAM_DUMP = "data/raw/wikipedia/testwiki-pages-articles-multistream.xml.bz2"
MULTISTREAM_INDEX = "data/raw/wikipedia/testwiki-pages-articles-multistream-index.txt.bz2"
STRAY_SHARD = "data/examples/phase1/part-00003.hdf5"
BOOKS = Path("data/raw/bookcorpus")


# ---- inputs -------------------------------------------------------------------------------------


def in_turn(*builds: Callable[[Path], None]) -> Callable[[Path], None]:
    """One build made of several, run in order."""

    def build(root: Path) -> None:
        for each in builds:
            each(root)

    return build


def param(dotted: str, value) -> Callable[[Path], None]:
    return lambda root: set_params(root, {dotted: value})


def param_as_in_repo(dotted: str) -> Callable[[Path], None]:
    value = repo_params()
    for key in dotted.split("."):
        value = value[key]
    return param(dotted, value)


def raw_param(dotted: str, yaml_text: str) -> Callable[[Path], None]:
    """params.yaml with `yaml_text` as the value of `dotted`, as a user types it (`no`, `.nan`):
    what YAML reads it as is part of the test."""
    marker = "raw-param-value-to-replace"

    def build(root: Path) -> None:
        set_params(root, {dotted: marker})
        text = (root / "params.yaml").read_text(encoding="utf-8")
        assert text.count(marker) == 1
        (root / "params.yaml").write_text(text.replace(marker, yaml_text), encoding="utf-8")

    return build


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


def truncated_bz2_dump(root: Path) -> None:
    """A download cut off half-way: the first half of a bz2 dump of 300 articles."""
    pages = [(i, f"Article {i}", f"Article {i} is about harbour {i}. " * 20, 0, None) for i in range(1, 301)]
    dump = write_dump(root / WIKI_DUMP_BZ2, pages=pages)
    dump.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])


def good_bz2_dump(root: Path) -> None:
    write_dump(root / WIKI_DUMP_BZ2)


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


def text_in_one_book(root: Path) -> None:
    """One blank book written; the other stays blank (a blank book is skipped, no text at all is an error)."""
    (root / BOOKS / "one.txt").write_text("Once upon a time.\nThe end.\n", encoding="utf-8")


def latin1_txt_book(root: Path) -> None:
    (root / BOOKS).mkdir(parents=True)
    (root / BOOKS / "story.txt").write_bytes("Once upon a time.\nSkål!\n".encode("latin-1"))


def utf8_txt_book(root: Path) -> None:
    (root / BOOKS / "story.txt").write_text("Once upon a time.\nSkål!\n", encoding="utf-8")


def document_table(root: Path) -> None:
    """data/clean/wikipedia, what stages.shard reads: 200 documents of a few sentences of
    random words (enough text for Punkt to learn where sentences end)."""
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(300)]
    (root / "data/clean/wikipedia").mkdir(parents=True)
    writer = DocumentWriter(root / "data/clean/wikipedia")
    for doc in range(200):
        sentences = [" ".join(rng.choice(words, size=8)).capitalize() + "." for _ in range(4)]
        writer.add("wikipedia", f"doc{doc}", f"Title {doc}", " ".join(sentences))
    writer.close()


def pretraining_project(root: Path) -> None:
    """A tiny model, its vocab and HDF5 shards of both phases (tests/support/stage_workspace.py)."""
    make_workspace(root)


def phase2_shard_among_phase1(root: Path) -> None:
    """A shard of phase 2 (24 tokens, 4 masked positions) copied in among those of phase 1 (16, 3)."""
    pretraining_project(root)
    (root / STRAY_SHARD).write_bytes((root / "data/examples/phase2/part-00000.hdf5").read_bytes())


def remove_stray_shard(root: Path) -> None:
    (root / STRAY_SHARD).unlink()


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
ANOTHER_QUESTION = {
    "id": "q3",
    "question": "What was dredged in 1850?",
    "answers": [{"text": "The harbour", "answer_start": 0}],
}
GOOD_TRAIN = squad_json([QUESTION, ANOTHER_QUESTION])  # two windows: one global batch of finetune_project


def write_json(root: Path, relative: str, data) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(json.dumps(data), encoding="utf-8")


def json_file(relative: str, data) -> Callable[[Path], None]:
    return lambda root: write_json(root, relative, data)


def squad_source(data) -> Callable[[Path], None]:
    """squad.sources.v1.1 pointing at local train/dev files; the train file holds `data`."""

    def build(root: Path) -> None:
        write_json(root, "sources/train.json", data)
        write_json(root, "sources/dev.json", squad_json([QUESTION]))
        set_params(root, {"squad.sources": {"v1.1": {"train": "sources/train.json", "dev": "sources/dev.json"},
                                            "v2.0": {"train": "sources/train.json", "dev": "sources/dev.json"}}})  # fmt: skip

    return build


def squad_v2_source(train_qas: list) -> Callable[[Path], None]:
    """squad.run [v2.0], its sources local files: the train file holds `train_qas`."""

    def build(root: Path) -> None:
        write_json(root, "sources/train.json", squad_json(train_qas, "v2.0"))
        write_json(root, "sources/dev.json", squad_json([QUESTION, UNANSWERABLE], "v2.0"))
        files = {"train": "sources/train.json", "dev": "sources/dev.json"}
        set_params(root, {"squad.run": ["v2.0"], "squad.sources": {"v1.1": files, "v2.0": files}})

    return build


def finetune_project(train) -> Callable[[Path], None]:
    """A tiny random BERT as data/weights/phase2 and `train` as data/squad/train.json."""

    def build(root: Path) -> None:
        set_params(root, {"finetune.init": "phase2", "squad.recipe": {"epochs": 1, "global_batch_size": 2, "micro_batch_size": 2},
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


def evaluation_inputs(dev, predictions, null_odds=None) -> Callable[[Path], None]:
    """What evaluate_squad reads; `null_odds` (predict_squad's null_odds.json) for a v2.0 dev set."""

    def build(root: Path) -> None:
        write_json(root, "data/squad/dev.json", dev)
        write_json(root, "data/predictions/predictions.json", predictions)
        if null_odds is not None:
            write_json(root, "data/predictions/null_odds.json", null_odds)

    return build


RTE_HEADER = "index\tsentence1\tsentence2\tlabel\n"
RTE_GOOD = RTE_HEADER + "0\tAnn was born in 1850.\tAnn was born.\tentailment\n"


def task_source(train: str, dev: str = RTE_GOOD) -> Callable[[Path], None]:
    """tasks.rte.sources naming a folder with `train` as train.tsv and `dev` as dev.tsv."""

    def build(root: Path) -> None:
        (root / "sources/RTE").mkdir(parents=True, exist_ok=True)
        (root / "sources/RTE/train.tsv").write_text(train, encoding="utf-8")
        (root / "sources/RTE/dev.tsv").write_text(dev, encoding="utf-8")
        set_params(root, {"tasks.rte.sources": ["sources/RTE"]})

    return build


# ---- the input boundary (issue 28): text, archives, downloads, configs, params -----------------

LATIN1 = "0\tAnn was born in Malmö.\tAnn was born.\tentailment\n".encode("latin-1")


def raw_params(edit: Callable[[str], str]) -> Callable[[Path], None]:
    """params.yaml edited as text, as a user's editor would: duplicate keys, other encodings."""

    def build(root: Path) -> None:
        path = root / "params.yaml"
        path.write_bytes(edit(path.read_text(encoding="utf-8")).encode("latin-1"))

    return build


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def cased_bpe(root: Path) -> None:
    """sources/tokenizer.json: a byte-level BPE that keeps case (as ModernBERT's)."""
    from bert.text.vocab import train_bpe

    tokenizer = train_bpe(lambda: iter(VOCAB * 3), vocab_size=300, min_frequency=2, lower_case=False)
    (root / "sources").mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(root / "sources/tokenizer.json"))


def rewrite_params(root: Path) -> None:
    """params.yaml rewritten as the tests write it (what a user's fix comes to)."""
    write_params(root)


def books_with_a_fifo(root: Path) -> None:
    """corpora.bookcorpus.sources naming a folder of books that holds a FIFO (`mkfifo`)."""
    (root / "sources/books").mkdir(parents=True)
    (root / "sources/books/book.txt").write_text("A book.\n\nIts second paragraph.\n")
    os.mkfifo(root / "sources/books/pipe")
    set_params(root, {"corpora.bookcorpus.sources": ["sources/books"]})


def remove_fifo(root: Path) -> None:
    (root / "sources/books/pipe").unlink()


def task_file_linked_from_elsewhere(root: Path) -> None:
    """tasks.rte.sources naming a folder whose train.tsv is a link to a file outside it."""
    task_source(RTE_GOOD)(root)
    (root / "elsewhere").mkdir()
    (root / "sources/RTE/train.tsv").rename(root / "elsewhere/train.tsv")
    (root / "sources/RTE/train.tsv").symlink_to("../../elsewhere/train.tsv")


def task_bytes(train: bytes) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        task_source(RTE_GOOD)(root)
        (root / "sources/RTE/train.tsv").write_bytes(train)

    return build


def zip_task(damage: str | None) -> Callable[[Path], None]:
    """tasks.rte.sources: [sources/RTE.zip], as GLUE publishes it (RTE/train.tsv, RTE/dev.tsv);
    `damage` "member" flips bytes inside train.tsv's compressed data, "encrypted" marks it
    password-protected (the general-purpose flag's bit 0, in both headers), "latin1" stores it in
    Latin-1."""

    def build(root: Path) -> None:
        (root / "sources").mkdir(exist_ok=True)
        archive = root / "sources/RTE.zip"
        body = RTE_GOOD.removeprefix(RTE_HEADER) * 40
        train = (RTE_HEADER + body).encode() if damage != "latin1" else RTE_HEADER.encode() + LATIN1
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
            zipped.writestr("RTE/train.tsv", train)
            zipped.writestr("RTE/dev.tsv", RTE_GOOD)
        data = bytearray(archive.read_bytes())
        if damage == "member":
            start = 30 + len("RTE/train.tsv")  # the first member's data follows its local header
            data[start + 10 : start + 20] = bytes(b ^ 0xFF for b in data[start + 10 : start + 20])
        elif damage == "encrypted":
            data[6] |= 1  # local header of the first member
            central = data.index(b"PK\x01\x02")
            data[central + 8] |= 1
        archive.write_bytes(bytes(data))
        set_params(root, {"tasks.rte.sources": ["sources/RTE.zip"]})

    return build


def swag_source(train: bytes) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        (root / "sources").mkdir(exist_ok=True)
        (root / "sources/train.csv").write_bytes(train)
        (root / "sources/val.csv").write_bytes((REPO / "data/sample/swag/val.csv").read_bytes())
        set_params(root, {"tasks.swag.sources": ["sources/train.csv", "sources/val.csv"]})

    return build


SWAG_TRAIN = (REPO / "data/sample/swag/train.csv").read_bytes()
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Sign in to continue</body></html>\n"
)


def squad_source_bytes(train: bytes) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        squad_source(squad_json([QUESTION]))(root)
        (root / "sources/train.json").write_bytes(train)

    return build


def weights_folder(change: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """weights.tiny: a local Hugging Face folder (tests/shard_fixtures.tiny_hf_folder), then `change`d;
    finetune.init names it, so download_weights@tiny fetches and checks it."""

    def build(root: Path) -> None:
        folder = root / "sources/tiny"
        if folder.exists():
            shutil.rmtree(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tiny_hf_folder(folder)
        if change:
            change(folder)
        set_params(root, {"weights": {"tiny": "sources/tiny"}, "finetune.init": "tiny"})

    return build


def config_edit(**values) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | values))

    return change


def html_file(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes(HTML_PAGE)


def task_corpus(data) -> Callable[[Path], None]:
    """corpora.squad_text, kind task, reading sources/squad.json (`data`) for its text, as
    download@squad_text leaves it in data/raw/squad_text."""

    def build(root: Path) -> None:
        corpus = {
            "kind": "task",
            "sources": ["sources/squad.json"],
            "checksums": [],
            "columns": ["context", "question"],
        }
        set_params(root, {"corpora": {"squad_text": corpus}, "mixing.weights": {"squad_text": 1.0}})
        write_json(root, "sources/squad.json", data)
        write_json(root, "data/raw/squad_text/squad.json", data)

    return build


def book_linked_from_elsewhere(root: Path) -> None:
    """A link put into data/raw/bookcorpus by hand, leading out of it."""
    write_bytes(root / "elsewhere/story.txt", b"Once upon a time.\n")
    (root / BOOKS).mkdir(parents=True)
    (root / BOOKS / "story.txt").symlink_to("../../../elsewhere/story.txt")


def book_copied_in(root: Path) -> None:
    (root / BOOKS / "story.txt").unlink()
    shutil.copy(root / "elsewhere/story.txt", root / BOOKS / "story.txt")


# ---- the catalogue ------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    command: tuple[str, ...]
    build: Callable[[Path], None]
    words: tuple[str, ...]  # the error line holds each of them
    published: str  # what the command would write: absent after the failure, there after the fix
    fix: Callable[[Path], None]  # repairs the input; then the command succeeds
    exit_code: int = 1
    before_work: bool = False  # the error line is all the stage prints: it stopped before any work
    absent: tuple[str, ...] = ()  # the error line holds none of them (a fix that does not apply)


WIKIPEDIA = ("stages.documents", "wikipedia")
BOOKCORPUS = ("stages.documents", "bookcorpus")
SQUAD_TEXT = ("stages.documents", "squad_text")
SHARD = ("stages.shard", "wikipedia")
PRETRAIN = ("stages.pretrain", "phase1")
DOWNLOAD_SQUAD = ("stages.download_squad",)
DOWNLOAD_BOOKS = ("stages.download", "bookcorpus")
DOWNLOAD_RTE = ("stages.download_task", "rte")
DOWNLOAD_SWAG = ("stages.download_task", "swag")
DOWNLOAD_TINY = ("stages.download_weights", "tiny")
VOCAB_STAGE = ("stages.vocab",)
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
TRAP = "YAML reads an unquoted no/off/yes/on as a boolean"

CASES = [
    # Wikipedia dumps
    Case("wiki-ns-word", WIKIPEDIA, dump_with_ns("zero"), (WIKI_DUMP, "Zoë Quill", "<ns>zero</ns>", "namespace number"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-ns-empty", WIKIPEDIA, dump_with_ns(""), (WIKI_DUMP, "<ns></ns>", "not a namespace number"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-not-utf8", WIKIPEDIA, latin1_dump, (WIKI_DUMP, "malformed XML at line", "not UTF-8"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-html-page", WIKIPEDIA, html_dump, (WIKI_DUMP, "an HTML page, not a MediaWiki XML export"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-no-dump", WIKIPEDIA, empty_dump_folder, ("data/raw/wikipedia", "no Wikipedia dump"),
         "data/documents/wikipedia", fix=good_dump),
    Case("wiki-bz2-truncated", WIKIPEDIA, truncated_bz2_dump, (WIKI_DUMP_BZ2, "truncated or corrupt", "download it again"),
         "data/documents/wikipedia", fix=good_bz2_dump),
    Case("wiki-multistream-truncated", WIKIPEDIA, truncated_multistream,
         (MULTISTREAM_DUMP, "the bz2 stream at byte offset", "is truncated"), "data/documents/wikipedia", fix=good_multistream),
    Case("wiki-multistream-stale-offset", WIKIPEDIA, multistream_with_stale_offset,
         (MULTISTREAM_DUMP, "the bz2 stream at byte offset", "where its index says the next stream starts", "stale"),
         "data/documents/wikipedia", fix=good_multistream),
    Case("wiki-multistream-stale-ids", WIKIPEDIA, multistream_with_stale_ids,
         (MULTISTREAM_DUMP, "at byte offset", "holds page id 5", "lists page id 55", "stale"), "data/documents/wikipedia",
         fix=good_multistream),
    Case("wiki-index-without-dump", WIKIPEDIA, index_without_dump,
         (MULTISTREAM_INDEX, "a multistream index without its dump"), "data/documents/wikipedia", fix=good_multistream),
    # Books: .txt and Parquet
    Case("parquet-int-text", BOOKCORPUS, parquet_text([1, 2], pa.int64()), ("books.parquet", "`text` column holds int64"),
         "data/documents/bookcorpus", fix=good_parquet),
    Case("parquet-binary-text", BOOKCORPUS, parquet_text([b"a", b"b"], pa.binary()), ("books.parquet", "holds binary"),
         "data/documents/bookcorpus", fix=good_parquet),
    Case("parquet-list-text", BOOKCORPUS, parquet_text([["a"], ["b"]], pa.list_(pa.string())),
         ("books.parquet", "holds list<", "not strings"), "data/documents/bookcorpus", fix=good_parquet),
    Case("parquet-corrupt-zstd", BOOKCORPUS, corrupt_zstd_parquet, ("books.parquet", "row group 1 of 3", "corrupt"),
         "data/documents/bookcorpus", fix=good_parquet),
    Case("txt-all-blank", BOOKCORPUS, blank_txt_books, ("data/raw/bookcorpus", "contain no text"),
         "data/documents/bookcorpus", fix=text_in_one_book),
    Case("txt-not-utf8", BOOKCORPUS, latin1_txt_book, ("story.txt", "not valid UTF-8", "line 2"),
         "data/documents/bookcorpus", fix=utf8_txt_book),
    # Params, through a real stage: one line before any work
    Case("params-seed-negative", SHARD, in_turn(document_table, param("seed", -1)),
         ("params.yaml", "seed is -1", "an integer in [0, 4294967295]"), "data/shards/wikipedia",
         fix=param_as_in_repo("seed"), before_work=True),
    Case("params-max-steps-nan", PRETRAIN, in_turn(pretraining_project, raw_param("pretrain.phase1.max_steps", ".nan")),
         ("params.yaml", "pretrain.phase1.max_steps", "nan", "an integer >= 1"), "data/weights/phase1",
         fix=param("pretrain.phase1.max_steps", 8), before_work=True),
    Case("params-precision-no", PRETRAIN, in_turn(pretraining_project, raw_param("pretrain.precision", "no")),
         ("params.yaml", "pretrain.precision", TRAP, '"fp32"'), "data/weights/phase1",
         fix=param("pretrain.precision", "fp32"), before_work=True),
    # Pretraining shards
    Case("hdf5-shard-of-another-phase", PRETRAIN, phase2_shard_among_phase1,
         (STRAY_SHARD, "sequences of 24 tokens with 4 masked positions", "part-00000.hdf5 has 16 and 3", "examples stage"),
         "data/weights/phase1", fix=remove_stray_shard),
    # SQuAD: download_squad checks the version of what it fetches; a rejected file is fetched again
    Case("squad-json-list", DOWNLOAD_SQUAD, squad_source([QUESTION]), ("sources/train.json", "not a SQuAD JSON file", "list"),
         "data/squad", fix=squad_source(squad_json([QUESTION]))),
    Case("squad-v2-for-v1", DOWNLOAD_SQUAD, squad_source(squad_json([QUESTION], "v2.0")),
         ("sources/train.json", "'v2.0' in the file", "squad.run runs 'v1.1'"), "data/squad",
         fix=squad_source(squad_json([QUESTION]))),
    # SQuAD: finetune_squad / predict_squad read the questions
    Case("squad-no-questions", FINETUNE, finetune_project(squad_json([QUESTION]) | {"data": []}),
         ("data/squad/train.json", "has no questions"), "data/models/squad",
         fix=json_file("data/squad/train.json", GOOD_TRAIN)),
    Case("squad-question-null", FINETUNE, finetune_project(squad_json([QUESTION | {"question": None}])),
         ("data/squad/train.json", "question q1", "'question' is None"), "data/models/squad",
         fix=json_file("data/squad/train.json", GOOD_TRAIN)),
    Case("squad-unanswerable-in-v1", FINETUNE, finetune_project(squad_json([QUESTION, UNANSWERABLE])),
         ("data/squad/train.json", "question q2 is unanswerable", "version '1.1'", "v2.0"), "data/models/squad",
         fix=json_file("data/squad/train.json", squad_json([QUESTION, UNANSWERABLE], "v2.0"))),  # as the line says
    Case("squad-answer-past-context", FINETUNE,
         finetune_project(squad_json([QUESTION | {"answers": [{"text": "1850", "answer_start": 400}]}, ANOTHER_QUESTION])),
         ("data/squad/train.json", "question q1", "not at answer_start 400"), "data/models/squad",
         fix=json_file("data/squad/train.json", GOOD_TRAIN)),
    Case("squad-answer-not-an-object", FINETUNE, finetune_project(squad_json([QUESTION | {"answers": ["1850"]}])),
         ("data/squad/train.json", "question q1", "an answer is '1850', not an object with 'text'"),
         "data/models/squad", fix=json_file("data/squad/train.json", GOOD_TRAIN)),
    Case("squad-plausible-answers-not-a-list", FINETUNE,
         finetune_project(squad_json([QUESTION, UNANSWERABLE | {"plausible_answers": 0}], "v2.0")),
         ("data/squad/train.json", "question q2", "'plausible_answers' is 0, not a list"), "data/models/squad",
         fix=json_file("data/squad/train.json", squad_json([QUESTION, UNANSWERABLE], "v2.0"))),
    Case("squad-fewer-windows-than-a-batch", FINETUNE, finetune_project(squad_json([QUESTION])),
         ("data/squad/train.json", "1 training windows", "global_batch_size 2 (finetune.recipe, squad.recipe)"), "data/models/squad",
         fix=json_file("data/squad/train.json", GOOD_TRAIN)),
    Case("squad-duplicate-ids", PREDICT, predict_project(squad_json([QUESTION, QUESTION])),
         ("data/squad/dev.json", "question id 'q1' occurs twice"), "data/predictions",
         fix=json_file("data/squad/dev.json", GOOD_TRAIN)),
    # SWAG and GLUE: download_task reads each split through the task's reader before publishing
    Case("task-label-out-of-range", DOWNLOAD_RTE, task_source(RTE_HEADER + "0\tA.\tB.\tentailment\n1\tC.\tD.\tyes\n"),
         ("sources/RTE/train.tsv", "line 3", "label 'yes' is not one of RTE's labels"), "data/tasks/rte",
         fix=task_source(RTE_GOOD)),
    Case("task-missing-column", DOWNLOAD_RTE, task_source(RTE_GOOD, RTE_GOOD + "1\tC.\tD.\n"),
         ("sources/RTE/dev.tsv", "line 3 has 3 fields, the header 4"), "data/tasks/rte", fix=task_source(RTE_GOOD)),
    Case("task-file-of-another-task", DOWNLOAD_RTE,
         task_source("index\tquestion\tsentence\tlabel\n0\tWho?\tAnn.\tentailment\n"),
         ("sources/RTE/train.tsv", "no column 'sentence1'", "this is not RTE's train.tsv"), "data/tasks/rte",
         fix=task_source(RTE_GOOD)),
    Case("task-split-missing", DOWNLOAD_RTE, in_turn(task_source(RTE_GOOD), lambda root: (root / "sources/RTE/dev.tsv").unlink()),
         ("no dev.tsv among the downloaded files for RTE", "tasks.rte.sources"), "data/tasks/rte",
         fix=task_source(RTE_GOOD)),
    # SQuAD: the official evaluation, as a stage and as `python -m bert.squad`
    Case("eval-v2-labelled-v1", EVALUATE, evaluation_inputs(squad_json([QUESTION, UNANSWERABLE]), {"q1": "1850", "q2": ""}),
         ("data/squad/dev.json", "question q2 has no answers", "version '1.1'"), "metrics/squad.json",
         fix=evaluation_inputs(squad_json([QUESTION, UNANSWERABLE], "v2.0"), {"q1": "1850", "q2": ""},
                               null_odds={"q1": -3.0, "q2": 2.0})),
    Case("eval-predictions-list", EVALUATE, evaluation_inputs(squad_json([QUESTION]), ["1850"]),
         ("data/predictions/predictions.json", "expected a JSON object"), "metrics/squad.json",
         fix=evaluation_inputs(squad_json([QUESTION]), {"q1": "1850"})),
    Case("eval-prediction-missing", EVALUATE, evaluation_inputs(GOOD_TRAIN, {"q1": "1850"}),
         ("data/predictions/predictions.json", "no answer for question q3 of data/squad/dev.json", "1 of 2",
          "re-run predict_squad"), "metrics/squad.json",
         fix=evaluation_inputs(GOOD_TRAIN, {"q1": "1850", "q3": "The harbour"})),
    Case("eval-null-odds-missing", EVALUATE,
         evaluation_inputs(squad_json([QUESTION, UNANSWERABLE], "v2.0"), {"q1": "1850", "q2": ""}, null_odds={"q1": -3.0}),
         ("data/predictions/null_odds.json", "no probability for question q2"), "metrics/squad.json",
         fix=evaluation_inputs(squad_json([QUESTION, UNANSWERABLE], "v2.0"), {"q1": "1850", "q2": ""},
                               null_odds={"q1": -3.0, "q2": 2.0})),
    Case("official-eval-v2-labelled-v1", OFFICIAL_EVALUATION,
         evaluation_inputs(squad_json([QUESTION, UNANSWERABLE]), {"q1": "1850", "q2": ""}),
         ("data/squad/dev.json", "question q2 has no answers"), "out.json",
         fix=evaluation_inputs(squad_json([QUESTION, UNANSWERABLE], "v2.0"), {"q1": "1850", "q2": ""})),
    # The input boundary (issue 28): params.yaml as a file, before any work
    Case("params-not-utf8", DOWNLOAD_RTE, in_turn(task_source(RTE_GOOD), raw_params(lambda text: "# Malmö\n" + text)),
         ("params.yaml", "not UTF-8", "line 1, column 7", "save the file as UTF-8"), "data/tasks/rte",
         fix=in_turn(rewrite_params, task_source(RTE_GOOD)), before_work=True),
    Case("params-duplicate-key", DOWNLOAD_RTE, in_turn(task_source(RTE_GOOD), raw_params(lambda text: text + "seed: 7\n")),
         ("params.yaml", "the key 'seed' is given twice", "YAML would keep only the last"), "data/tasks/rte",
         fix=in_turn(rewrite_params, task_source(RTE_GOOD)), before_work=True),
    Case("params-scheduler-scheme", DOWNLOAD_RTE, in_turn(task_source(RTE_GOOD), param("compute.scheduler", "htp://node1:8786")),
         ("compute.scheduler", "unknown scheme 'htp://'"), "data/tasks/rte", fix=param("compute.scheduler", "local"),
         before_work=True),
    Case("params-scheduler-port", DOWNLOAD_RTE, in_turn(task_source(RTE_GOOD), param("compute.scheduler", "tcp://node1:eighty")),
         ("compute.scheduler", "the port 'eighty' is not a number"), "data/tasks/rte",
         fix=param("compute.scheduler", "local"), before_work=True),
    # Text that is not UTF-8, named as written (a file of a source folder, a zip member), line and column
    Case("task-tsv-not-utf8", DOWNLOAD_RTE, task_bytes(RTE_HEADER.encode() + LATIN1),
         ("sources/RTE/train.tsv", "not UTF-8", "line 2, column 23"), "data/tasks/rte", fix=task_source(RTE_GOOD)),
    Case("task-zip-member-not-utf8", DOWNLOAD_RTE, zip_task("latin1"),
         ("sources/RTE.zip:RTE/train.tsv", "not UTF-8", "line 2"), "data/tasks/rte", fix=zip_task(None)),
    Case("swag-csv-not-utf8", DOWNLOAD_SWAG, swag_source(SWAG_TRAIN.decode().encode("cp1252", errors="replace")),
         ("sources/train.csv", "not UTF-8", "line 2"), "data/tasks/swag", fix=swag_source(SWAG_TRAIN)),
    Case("squad-json-not-utf8", DOWNLOAD_SQUAD, squad_source_bytes(json.dumps(squad_json([QUESTION | {"question": "Malmö?"}]), ensure_ascii=False).encode("latin-1")),
         ("sources/train.json", "not UTF-8"), "data/squad", fix=squad_source(squad_json([QUESTION]))),
    Case("vocab-file-not-utf8", VOCAB_STAGE,
         in_turn(param("vocab.source", "file:sources/vocab.txt"),
                 lambda root: write_bytes(root / "sources/vocab.txt", "\n".join([*VOCAB, "malmö"]).encode("latin-1"))),
         ("sources/vocab.txt", "not UTF-8", f"line {len(VOCAB) + 1}, column 5"), "data/vocab",
         fix=lambda root: write_vocab(root / "sources/vocab.txt")),
    Case("vocab-lower-case-contradicts-tokenizer-json", VOCAB_STAGE,
         in_turn(param("vocab.source", "file:sources/tokenizer.json"), param("vocab.lower_case", True), cased_bpe),
         ("vocab.lower_case is true", "vocab.source file:sources/tokenizer.json", "set vocab.lower_case: false"),
         "data/vocab", fix=param("vocab.lower_case", False)),
    # Archives and downloads: damaged or encrypted members, HTML served in place of the file
    Case("task-zip-damaged-member", DOWNLOAD_RTE, zip_task("member"),
         ("sources/RTE.zip:RTE/train.tsv", "damaged", "download the archive again"), "data/tasks/rte",
         fix=zip_task(None)),
    Case("task-zip-encrypted-member", DOWNLOAD_RTE, zip_task("encrypted"),
         ("sources/RTE.zip:RTE/train.tsv", "encrypted"), "data/tasks/rte", fix=zip_task(None)),
    Case("squad-html-page", DOWNLOAD_SQUAD, squad_source_bytes(HTML_PAGE),
         ("sources/train.json", "an HTML page, not the JSON expected"), "data/squad",
         fix=squad_source(squad_json([QUESTION]))),
    Case("weights-html-config", DOWNLOAD_TINY, weights_folder(html_file("config.json")),
         ("weights.tiny: sources/tiny/config.json", "an HTML page"), "data/weights/tiny", fix=weights_folder()),
    # config.json: types and ranges, one check for model.size and weights; weights against their config
    Case("weights-config-zero-heads", DOWNLOAD_TINY, weights_folder(config_edit(num_attention_heads=0)),
         ("sources/tiny/config.json", "num_attention_heads is 0", ">= 1"), "data/weights/tiny", fix=weights_folder()),
    Case("weights-not-of-config", DOWNLOAD_TINY, weights_folder(config_edit(intermediate_size=64)),
         ("sources/tiny", "intermediate.dense.weight", "[64, 16]", "do not belong together"), "data/weights/tiny",
         fix=weights_folder()),
    # SQuAD / SWAG structure
    Case("squad-data-not-a-list", DOWNLOAD_SQUAD, squad_source({"version": "1.1", "data": {"title": "x"}}),
         ("sources/train.json", "no top-level 'data' list"), "data/squad", fix=squad_source(squad_json([QUESTION]))),
    Case("squad-article-not-an-object", DOWNLOAD_SQUAD, squad_source({"version": "1.1", "data": ["Harbour"]}),
         ("sources/train.json", "data[0]", "no 'paragraphs' list"), "data/squad",
         fix=squad_source(squad_json([QUESTION]))),
    # issue 40: contradictory SQuAD v2.0 labels; local sources that are not plain files
    Case("squad-unanswerable-with-answers", DOWNLOAD_SQUAD,
         squad_v2_source([QUESTION, UNANSWERABLE | {"answers": [{"text": "The harbour", "answer_start": 0}]}]),
         ("sources/train.json", "question q2 is marked is_impossible but has 1 answer(s)", "empty its answers"),
         "data/squad", fix=squad_v2_source([QUESTION, UNANSWERABLE])),
    Case("squad-is-impossible-a-string", DOWNLOAD_SQUAD, squad_v2_source([QUESTION | {"is_impossible": "false"}]),
         ("sources/train.json", "question q1", "'is_impossible' is 'false'", "without quotes"), "data/squad",
         fix=squad_v2_source([QUESTION | {"is_impossible": False}])),
    Case("books-folder-holding-a-fifo", DOWNLOAD_BOOKS, books_with_a_fifo,
         ("sources/books/pipe is a named pipe (FIFO)", "remove it"), "data/raw/bookcorpus", fix=remove_fifo),
    Case("task-file-linked-from-elsewhere", DOWNLOAD_RTE, task_file_linked_from_elsewhere,
         ("sources/RTE/train.tsv is a symbolic link to", "outside the source folder", "follow_links: true"),
         "data/tasks/rte", fix=param("follow_links", True)),
    Case("swag-runaway-quote", DOWNLOAD_SWAG, swag_source(SWAG_TRAIN + b'9,x,1,"' + b"word " * 30000 + b"\n"),
         ("sources/train.csv", "field larger than field limit", "unbalanced double quote"), "data/tasks/swag",
         fix=swag_source(SWAG_TRAIN)),
    # issue 49: newer doors
    Case("task-corpus-json-of-another-shape", SQUAD_TEXT, task_corpus({"data": ["The harbour was dredged in 1850."]}),
         ("sources/squad.json (corpora.squad_text.sources)", 'data[0] is "The harbour was dredged', "not an object",
          '{"data": [{"paragraphs": [{"context": "...", "qas": [{"question": "..."}]}]}]}'),
         "data/documents/squad_text", fix=task_corpus(GOOD_TRAIN)),
    Case("weights-entry-names-a-file", DOWNLOAD_TINY,
         in_turn(weights_folder(), param("weights", {"tiny": "sources/tiny/config.json"})),
         ("weights.tiny: sources/tiny/config.json is a file, not the folder of the weights", "config.json, vocab.txt"),
         "data/weights/tiny", fix=weights_folder()),
    Case("task-split-in-its-folder-and-its-zip", DOWNLOAD_RTE,
         in_turn(task_source(RTE_GOOD), zip_task(None), param("tasks.rte.sources", ["sources/RTE", "sources/RTE.zip"])),
         ("tasks.rte.sources: several train.tsv for RTE", "sources/RTE/train.tsv", "sources/RTE.zip:RTE/train.tsv",
          "keep one"), "data/tasks/rte", fix=param("tasks.rte.sources", ["sources/RTE"])),
    Case("raw-book-linked-from-elsewhere", BOOKCORPUS, book_linked_from_elsewhere,
         ("data/raw/bookcorpus/story.txt is a symbolic link to", "corpora.bookcorpus.sources", "download@bookcorpus"),
         "data/documents/bookcorpus", fix=book_copied_in, absent=("follow_links",)),
    Case("params-decontaminate-off-of-before", DOWNLOAD_RTE,
         in_turn(task_source(RTE_GOOD), raw_param("clean.decontaminate", "off")),
         ("params.yaml", "clean.decontaminate is false", "the value off is now spelled none"), "data/tasks/rte",
         fix=param("clean.decontaminate", "none"), before_work=True),
]  # fmt: skip


# ---- the same classes through the reader alone --------------------------------------------------
# Rows whose stage would cost seconds of torch start-up each (make test's budget): the reader the
# stage calls, on the same input; the stage rows above show that a UserError from it is one line.


def weights_in(tmp_path: Path, change: Callable[[Path], None]) -> Path:
    folder = tiny_hf_folder(tmp_path / "tiny")
    change(folder)
    return folder


def sharded(tmp_path: Path, index_text: Callable[[str], str]) -> Path:
    """A tiny model whose one weight file is listed by a model.safetensors.index.json, as
    `index_text` leaves the index's text."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)  # fmt: skip
    folder = tmp_path / "phase2"
    BertForQuestionAnswering(config).save_pretrained(folder)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    names = load_file(folder / "model-00001-of-00001.safetensors")
    index = json.dumps(
        {"metadata": {}, "weight_map": {name: "model-00001-of-00001.safetensors" for name in names}}
    )
    (folder / "model.safetensors.index.json").write_text(index_text(index))
    return folder


@dataclass
class ReaderCase:
    name: str
    read: Callable[[Path], object]  # reads the bad input it builds under the given folder
    words: tuple[str, ...]


READER_CASES = [
    ReaderCase("config-dropout-2", lambda tmp: BertConfig.from_json_file(weights_in(tmp, config_edit(hidden_dropout_prob=2.0)) / "config.json"),
               ("config.json", "hidden_dropout_prob is 2.0", "[0, 1)")),
    ReaderCase("config-layers-null", lambda tmp: BertConfig.from_json_file(weights_in(tmp, config_edit(num_hidden_layers=None)) / "config.json"),
               ("config.json", "num_hidden_layers is null")),
    ReaderCase("config-heads-string", lambda tmp: BertConfig.resolve(weights_in(tmp, config_edit(num_attention_heads="2")), 64),
               ("config.json", 'num_attention_heads is "2"')),
    ReaderCase("config-hidden-not-divisible", lambda tmp: BertConfig.from_json_file(weights_in(tmp, config_edit(num_attention_heads=3)) / "config.json"),
               ("config.json", "hidden_size 16 is not a multiple of num_attention_heads 3")),
    ReaderCase("weights-html-in-place", lambda tmp: check_pretrained(weights_in(tmp, html_file("pytorch_model.bin")), BertModel),
               ("pytorch_model.bin", "an HTML page")),
    ReaderCase("weights-index-truncated", lambda tmp: BertForQuestionAnswering.from_pretrained(sharded(tmp, lambda text: text[: len(text) // 2])),
               ("model.safetensors.index.json", "not valid JSON", "cut short")),
    # found by tests/test_fuzz_inputs.py: a shard name longer than a file name may be (ENAMETOOLONG)
    ReaderCase("weights-index-huge-shard-name", lambda tmp: read_weight_index(sharded(tmp, lambda text: text.replace("model-00001", "x" * 300_000, 1)) / "model.safetensors.index.json"),
               ("model.safetensors.index.json", "which is not a file beside it")),
]  # fmt: skip


@pytest.mark.parametrize("case", READER_CASES, ids=[case.name for case in READER_CASES])
def test_bad_file_is_one_line_through_its_reader(tmp_path, case):
    with pytest.raises(UserError) as error:
        case.read(tmp_path)
    message = str(error.value)
    assert "\n" not in message and len(message) < 1000, message
    for word in case.words:
        assert word in message, f"{word!r} not in {message!r}"


@pytest.mark.parametrize(
    "error, line",
    [
        (PermissionError(13, "Permission denied", "data/raw/.wikipedia.tmp-1@host-x"),
         "data/raw: permission denied; make the folder writable for you (chmod u+rwx data/raw) or run as its "
         "owner, then run again"),
        (PermissionError(1, "Operation not permitted", "data/vocab/vocab.txt"),
         "data/vocab: operation not permitted; make the folder writable for you (chmod u+rwx data/vocab) or "
         "run as its owner, then run again"),
        # a download's staging folder is not a name the user knows: the folder it is in
        (OSError(30, "Read-only file system", "data/.partial"),
         "data: read-only file system, where the command writes its output; remount it read-write (or run in "
         "a writable copy of the project), then run again"),
        # h5py, safetensors and pyarrow keep the system's words, not the errno
        (RuntimeError("Unable to synchronously create file (errno = 30, error message = 'Read-only file system')"),
         "cannot write an output (Unable to synchronously create file (errno = 30, error message = 'Read-only "
         "file system')): its folder is on a read-only file system; remount it read-write (or run in a writable "
         "copy of the project), then run again"),
    ],
)  # fmt: skip
def test_a_folder_that_cannot_be_written_is_one_line(capsys, error, line):
    """run_main turns a write the system refused into one line naming the folder (tests run as
    root, which writes anywhere chmod forbids: the errors are raised as the OS would; the real
    read-only mount is the next test)."""

    def main():
        raise error

    with pytest.raises(SystemExit) as exit_status:
        run_main(main)
    assert exit_status.value.code == 1
    assert capsys.readouterr().err == f"error: {line}\n"


def read_only(root: Path, folder: str, *command: str) -> subprocess.CompletedProcess:
    """`command` in `root` with root/folder bind-mounted read-only, in a user and mount namespace of
    its own (`unshare -rm`): a read-only file system refuses root too, as chmod does not."""
    mount = f'mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(["unshare", "-rm", "sh", "-c", mount, "sh", *command], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


CAN_MOUNT = (
    shutil.which("unshare") is not None
    and subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
)


@pytest.mark.skipif(not CAN_MOUNT, reason="needs unshare -rm (user and mount namespaces)")
def test_a_read_only_data_folder_is_one_line_and_the_run_after_remounting_works(tmp_path):
    """data/ mounted read-only: a download stage (its staging folder: an OSError traceback before)
    and a training stage (its ranks' log folder, checked before any work) each stop with one line
    naming the folder, publish nothing and leave nothing; the same command then works read-write."""
    root = make_workspace(tmp_path)
    squad_source(squad_json([QUESTION]))(root)
    before = sorted(p.relative_to(root) for p in (root / "data").rglob("*"))
    for command, line in [
        (DOWNLOAD_SQUAD, "error: data: read-only file system, where the command writes its output; remount it "
                         "read-write (or run in a writable copy of the project), then run again"),
        (("stages.pretrain", "phase1"), "error: data/logs/phase1 (the ranks' logs; BERT_LOG_DIR unset): data is "
                                        "on a read-only file system; set BERT_LOG_DIR to another folder, a writable one"),
    ]:  # fmt: skip
        result = read_only(root, "data", sys.executable, "-m", *command)
        assert result.returncode == 1 and result.stderr.splitlines()[-1] == line, result.stderr
        assert "Traceback" not in result.stderr
    assert sorted(p.relative_to(root) for p in (root / "data").rglob("*")) == before
    result = run_stage(root, *DOWNLOAD_SQUAD)
    assert result.returncode == 0, result.stderr
    assert (root / "data/squad/train.json").is_file()


def test_a_python_without_the_projects_packages_says_so_in_one_line():
    """`dvc repro` without .venv active runs the stages with another python: the first stage died
    of `No module named 'tqdm'`. `python -S` is this python without its site-packages."""
    result = subprocess.run([sys.executable, "-S", "-m", "stages.vocab"], cwd=REPO, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        f"error: {sys.executable} is not the project's Python environment (it lacks "
        f"{', '.join(stages.REQUIRED_MODULES)}); run `source .venv/bin/activate` in the repository first "
        "(dvc.yaml's commands say `python`), and run again\n"
    )


def test_the_required_modules_are_the_pinned_requirements_the_code_imports():
    """stages.REQUIRED_MODULES names a module of every pinned requirement but dvc (the command that
    runs the stages) and the optional ones, and nothing else."""
    from importlib.metadata import packages_distributions

    pinned = {
        line.split("==")[0].split("[")[0].lower().replace("_", "-")
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and "optional" not in line
    }
    provided_by = {
        module: {d.lower().replace("_", "-") for d in dists}
        for module, dists in packages_distributions().items()
    }
    covered = set().union(*(provided_by[module] for module in stages.REQUIRED_MODULES))
    assert covered == pinned - {"dvc"}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_one_line_and_publishes_nothing(tmp_path, case):
    write_params(tmp_path)
    case.build(tmp_path)
    result = run_stage(tmp_path, *case.command, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == case.exit_code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    if case.before_work:
        assert result.stderr.strip() == errors[0]
    for word in case.words:
        assert word in errors[0], f"{word!r} not in {errors[0]!r}"
    for word in case.absent:
        assert word not in errors[0], f"{word!r} in {errors[0]!r}"
    for staging in (".partial", ".tmp-", str(tmp_path)):  # the source as written, never a copy of it
        assert staging not in errors[0], errors[0]
    assert not (tmp_path / case.published).exists()
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
        set_params(tmp_path, {"compute.num_workers": processes})
        result = run_stage(tmp_path, *WIKIPEDIA, timeout=120)
        assert result.returncode == 0, result.stderr
        metrics = json.loads((tmp_path / "metrics/documents_wikipedia.json").read_text())
        assert metrics["skipped"]["template_budget"] == 1 and metrics["documents"] == 2
        assert "page 200 ('Bomb') skipped" in result.stderr
        tables.append(pq.read_table(tmp_path / "data/documents/wikipedia").to_pylist())
    assert tables[0] == tables[1]
    assert [row["title"] for row in tables[0]] == ["Zoë Quill", "Harbour"]
