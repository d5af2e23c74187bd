"""Multistream dumps: read by byte ranges on the workers, the same documents as reading the same XML
in one stream, whatever the number of workers or the start method; a truncated stream or a stale
index is one line naming the file and the byte offset, and nothing is published."""

import bz2
import multiprocessing
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bert.corpus import wikipedia
from bert.corpus.mediawiki import index_streams, read_header, stream_ranges
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import UserError
from sample_world.wiki_xml import DUMP_NAME, multistream
from tests.test_wikipedia import PAGES, write_dump

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DUMP = REPO / "data/sample/wikipedia" / DUMP_NAME
RANGE_BYTES = 20_000  # the sample has 4 page streams of ~25 kB: a range each


def write_multistream(
    folder: Path, xml: bytes, pages_per_stream: int = 100, name: str = "testwiki"
) -> tuple[Path, Path]:
    """`xml` as `<name>-pages-articles-multistream.xml.bz2` and its index in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    dump_bytes, index_bytes = multistream(xml, pages_per_stream)
    dump = folder / f"{name}-pages-articles-multistream.xml.bz2"
    index = folder / f"{name}-pages-articles-multistream-index.txt.bz2"
    dump.write_bytes(dump_bytes)
    index.write_bytes(index_bytes)
    return dump, index


def small_wiki(folder: Path) -> tuple[Path, Path]:
    """tests/test_wikipedia.py's 7 pages, one per stream: the template is in another range than
    the article that uses it."""
    xml = write_dump(folder / "source.xml").read_bytes()
    (folder / "source.xml").unlink()
    return write_multistream(folder, xml, pages_per_stream=1)


def offsets(index: Path) -> list[int]:
    return sorted({int(line.split(b":")[0]) for line in bz2.decompress(index.read_bytes()).splitlines()})


def rewrite_index(index: Path, change) -> None:
    lines = bz2.decompress(index.read_bytes()).decode("utf-8").splitlines()
    index.write_bytes(bz2.compress("".join(change(line) + "\n" for line in lines).encode("utf-8")))


def documents(folder: Path) -> list[dict]:
    return pq.read_table(folder).to_pylist()


@pytest.fixture
def sample_xml() -> bytes:
    return bz2.decompress(SAMPLE_DUMP.read_bytes())


@pytest.fixture
def small_ranges(monkeypatch):
    monkeypatch.setattr(wikipedia, "TASK_BYTES", RANGE_BYTES)


@pytest.mark.parametrize("processes", [1, 2])
def test_parallel_reader_gives_the_sequential_documents(tmp_path, sample_xml, small_ranges, processes):
    dump, index = write_multistream(tmp_path / "multistream", sample_xml)
    assert len(list(stream_ranges(dump, index, RANGE_BYTES))) == 4
    single = tmp_path / "single/testwiki-pages-articles.xml.bz2"
    single.parent.mkdir()
    single.write_bytes(bz2.compress(sample_xml))
    parallel_stats = extract_wikipedia(dump.parent, tmp_path / "parallel", processes, corpus="wikipedia")
    sequential_stats = extract_wikipedia(single.parent, tmp_path / "sequential", 1, corpus="wikipedia")
    assert documents(tmp_path / "parallel") == documents(tmp_path / "sequential")
    assert (tmp_path / "parallel/part-00000.parquet").read_bytes() == (
        tmp_path / "sequential/part-00000.parquet"
    ).read_bytes()
    assert len(documents(tmp_path / "parallel")) == 295
    for stats in (parallel_stats, sequential_stats):
        stats.seconds = stats.input_bytes = 0
    assert parallel_stats == sequential_stats  # pages, skipped by reason, bytes of XML
    assert sorted(p.name for p in tmp_path.iterdir()) == ["multistream", "parallel", "sequential", "single"]


def test_templates_reach_the_articles_of_other_ranges(tmp_path, monkeypatch):
    dump, index = small_wiki(tmp_path / "raw")
    assert len(list(stream_ranges(dump, index, 1))) == 7
    monkeypatch.setattr(wikipedia, "TASK_BYTES", 1)  # one page per task
    extract_wikipedia(tmp_path / "raw", tmp_path / "docs", compute=2, corpus="wikipedia")
    quill = documents(tmp_path / "docs")[0]
    assert quill["text"].split("\n")[0] == "Zoë Quill was a map maker from Ærøskøbing. She drew coastal maps."


def test_tasks_need_nothing_from_fork(tmp_path, sample_xml):
    """Both passes' tasks run in a spawn pool (fresh interpreters that inherit nothing): the same
    articles as the stage's own run."""
    dump, index = write_multistream(tmp_path / "raw", sample_xml)
    extract_wikipedia(tmp_path / "raw", tmp_path / "docs", compute=1, corpus="wikipedia")
    header = read_header(dump, next(index_streams(dump, index))[0])
    tasks = [
        (str(dump), header.namespaces, streams, end)
        for streams, end in stream_ranges(dump, index, RANGE_BYTES)
    ]
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(2) as pool:
        templates = pool.starmap(wikipedia._range_templates, tasks)
    assert sum(pages for pages, _, _ in templates) == 354
    templates_file = tmp_path / "templates.bin"
    wikipedia._write_templates_file(templates_file, (item for _, _, found in templates for item in found))
    with spawn.Pool(2, wikipedia._load_templates_file, (str(templates_file), header.namespaces)) as pool:
        results = pool.starmap(wikipedia._range_articles, tasks)
    articles = [
        (f"wikipedia:{page_id}", title, text)
        for found, _ in results
        for page_id, title, text in found
        if text
    ]
    assert articles == [(d["doc_id"], d["title"], d["text"]) for d in documents(tmp_path / "docs")]


# ---- bad multistream dumps: one line naming the file and the byte offset, nothing published ----


def expect_error(tmp_path: Path, message: str) -> None:
    with pytest.raises(UserError) as error:
        extract_wikipedia(tmp_path / "raw", tmp_path / "out/docs", compute=2, corpus="wikipedia")
    assert str(error.value) == message
    assert not (tmp_path / "out/docs").exists()
    assert not list((tmp_path / "out").glob("*"))  # no temporary folder either


def test_truncated_last_stream(tmp_path, small_ranges):
    dump, index = small_wiki(tmp_path / "raw")
    last = offsets(index)[-1]
    dump.write_bytes(dump.read_bytes()[: last + 100])
    expect_error(
        tmp_path,
        f"{dump}: the bz2 stream at byte offset {last} is truncated (the file ends at byte {last + 100}): "
        "the download is incomplete: download it again",
    )


def test_dump_cut_before_streams_of_its_index(tmp_path, small_ranges):
    dump, index = small_wiki(tmp_path / "raw")
    streams = offsets(index)
    dump.write_bytes(dump.read_bytes()[: streams[3]])
    expect_error(
        tmp_path,
        f"{dump}: its index {index} lists a stream at byte offset {streams[3]} (line 4), past the end of the "
        f"file ({streams[3]} bytes): the dump is truncated, or the index is not the one of this dump: "
        "download both again",
    )


def test_index_offset_that_starts_no_stream(tmp_path, small_ranges):
    dump, index = small_wiki(tmp_path / "raw")
    second, third = offsets(index)[1:3]
    rewrite_index(
        index,
        lambda line: line.replace(f"{third}:", f"{third + 3}:", 1) if line.startswith(f"{third}:") else line,
    )
    expect_error(
        tmp_path,
        f"{dump}: the bz2 stream at byte offset {second} ends at byte {third}, not at byte {third + 3} "
        "where its index says the next stream starts: the index is stale (made for another version of "
        "the dump): download both again",
    )


def test_index_of_another_version_of_the_dump(tmp_path, small_ranges):
    """Every offset shifted: the header stream does not end where the index puts the first page."""
    dump, index = small_wiki(tmp_path / "raw")
    first = offsets(index)[0]
    rewrite_index(index, lambda line: f"{int(line.split(':')[0]) - 5}:{line.split(':', 1)[1]}")
    expect_error(
        tmp_path,
        f"{dump}: the bz2 stream at byte offset 0 goes on past byte {first - 5}, where its index says the "
        "next stream starts: the index is stale (made for another version of the dump): download both again",
    )


def test_page_ids_that_do_not_match_the_index(tmp_path, small_ranges):
    dump, index = small_wiki(tmp_path / "raw")
    fifth = offsets(index)[4]
    rewrite_index(index, lambda line: line.replace(":5:", ":55:"))
    expect_error(
        tmp_path,
        f"{dump}: the bz2 stream at byte offset {fifth} holds page id 5 as page 1, where its index lists "
        "page id 55: the index is stale (made for another version of the dump): download both again",
    )


def test_index_without_its_dump(tmp_path):
    dump, index = small_wiki(tmp_path / "raw")
    dump.unlink()
    write_dump(tmp_path / "raw/other.xml", PAGES)
    expect_error(
        tmp_path,
        f"{index}: a multistream index without its dump (testwiki-pages-articles-multistream.xml.bz2 is not "
        "beside it): download the dump too, or remove the index",
    )


def test_multistream_dump_without_its_index_is_read_in_one_stream(tmp_path, sample_xml):
    dump, index = write_multistream(tmp_path / "raw", sample_xml)
    index.unlink()
    stats = extract_wikipedia(tmp_path / "raw", tmp_path / "docs", compute=1, corpus="wikipedia")
    assert stats.pages == 354 and stats.documents == 295
