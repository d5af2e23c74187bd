"""Multistream dumps: read by byte ranges on the workers, the same documents as reading the same XML
in one stream, whatever the number of workers or the start method; each range's task writes its
own part and returns only counts, and a task run again leaves one whole part; a truncated stream
or a stale index is one line naming the file and the byte offset, and nothing is published."""

import bz2
import hashlib
import multiprocessing
import os
import pickle
import signal
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bert.atomic import HOST, atomic_folder
from bert.corpus import documents as document_table
from bert.corpus import wikipedia
from bert.corpus.mediawiki import index_streams, read_header, stream_ranges
from bert.corpus.wikipedia import extract_wikipedia
from bert.errors import UserError
from sample_world.wiki_xml import DUMP_NAME, multistream
from tests.corpus.test_wikipedia import PAGES, write_dump

REPO = Path(__file__).resolve().parents[2]
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
    """tests/corpus/test_wikipedia.py's 7 pages, one per stream: the template is in another range than
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


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


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
    parallel_stats = extract_wikipedia(dump.parent, tmp_path / "parallel", "wikipedia", processes)
    sequential_stats = extract_wikipedia(single.parent, tmp_path / "sequential", "wikipedia", 1)
    assert documents(tmp_path / "parallel") == documents(tmp_path / "sequential")
    assert len(documents(tmp_path / "parallel")) == 295
    # a part per range; the single stream's ~100 kB of wikitext is one task
    assert sorted(p.name for p in (tmp_path / "parallel").iterdir()) == [
        f"part-000-{number:06d}-00000.parquet" for number in range(4)
    ]
    assert [p.name for p in (tmp_path / "sequential").iterdir()] == ["part-000-000000-00000.parquet"]
    for stats in (parallel_stats, sequential_stats):
        stats.seconds = stats.input_bytes = 0
    assert parallel_stats == sequential_stats  # pages, skipped by reason, bytes of XML
    assert sorted(p.name for p in tmp_path.iterdir()) == ["multistream", "parallel", "sequential", "single"]


def test_templates_reach_the_articles_of_other_ranges(tmp_path, monkeypatch):
    dump, index = small_wiki(tmp_path / "raw")
    assert len(list(stream_ranges(dump, index, 1))) == 7
    monkeypatch.setattr(wikipedia, "TASK_BYTES", 1)  # one page per task
    extract_wikipedia(tmp_path / "raw", tmp_path / "docs", "wikipedia", compute=2)
    quill = documents(tmp_path / "docs")[0]
    assert quill["text"].split("\n")[0] == "Zoë Quill was a map maker from Ærøskøbing. She drew coastal maps."


def test_part_names_and_bytes_follow_the_input_alone(tmp_path, sample_xml, small_ranges):
    dump, _ = write_multistream(tmp_path / "raw", sample_xml)
    write_dump(tmp_path / "raw/zz-single.xml")  # a second dump, in one stream: its parts come after
    extract_wikipedia(tmp_path / "raw", tmp_path / "one", "wikipedia", compute=1)
    extract_wikipedia(tmp_path / "raw", tmp_path / "many", "wikipedia", compute=2)
    assert digests(tmp_path / "many") == digests(tmp_path / "one")
    assert list(digests(tmp_path / "one")) == [
        *(f"part-000-{number:06d}-00000.parquet" for number in range(4)),
        "part-001-000000-00000.parquet",
    ]
    assert documents(tmp_path / "one")[-1]["title"] == "Harbour"  # the small dump's last article


def range_tasks(tmp_path: Path, sample_xml: bytes) -> tuple[list[tuple], Path, dict]:
    """The first pass done (in a spawn pool): the sample's ranges as tasks of either pass, the
    templates file and the namespaces."""
    dump, index = write_multistream(tmp_path / "raw", sample_xml)
    header = read_header(dump, next(index_streams(dump, index))[0])
    tasks = [
        (str(dump), header.namespaces, streams, end)
        for streams, end in stream_ranges(dump, index, RANGE_BYTES)
    ]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        templates = pool.starmap(wikipedia._range_templates, tasks)
    assert sum(pages for pages, _, _ in templates) == 354
    templates_file = tmp_path / "templates.bin"
    wikipedia._write_templates_file(templates_file, (item for _, _, found in templates for item in found))
    return tasks, templates_file, header.namespaces


def test_tasks_need_nothing_from_fork_and_return_no_text(tmp_path, sample_xml):
    """Both passes' tasks run in a spawn pool (fresh interpreters that inherit nothing): the same
    articles as the stage's own run, in the tasks' own parts; back come only counts."""
    dump, _ = write_multistream(tmp_path / "stage", sample_xml)
    stats = extract_wikipedia(dump.parent, tmp_path / "docs", "wikipedia", 1)
    tasks, templates_file, namespaces = range_tasks(tmp_path, sample_xml)
    parts = tmp_path / "parts"
    parts.mkdir()
    tasks = [(*task, str(parts), f"part-000-{number:06d}", "wikipedia") for number, task in enumerate(tasks)]
    spawn = multiprocessing.get_context("spawn")
    with spawn.Pool(2, wikipedia._load_templates_file, (str(templates_file), namespaces)) as pool:
        results = pool.starmap(wikipedia._range_articles, tasks)
    assert documents(parts) == documents(tmp_path / "docs")
    assert [found for found, _, _ in results] == [
        pq.ParquetFile(path).metadata.num_rows for path in sorted(parts.iterdir())
    ]
    assert sum(found for found, _, _ in results) == 295
    assert all(over_budget == [] for _, _, over_budget in results)
    assert sum((skipped for _, skipped, _ in results), Counter()) == stats.skipped
    text = "".join(d["text"] for d in documents(parts))
    assert len(pickle.dumps(results)) < 1000 < len(text) // 100  # counts back, not the articles


def die_while_writing(task: tuple) -> None:
    """A range's task SIGKILLed (as the OOM killer kills) while its part is half written."""
    document_table.ROW_GROUP_ROWS = 1  # a row group per document: the temporary is on disk at once
    real, calls = wikipedia._extract_article, []

    def extract(*article):
        calls.append(article)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*article)

    wikipedia._extract_article = extract
    wikipedia._range_articles(*task)


def test_a_task_run_again_leaves_one_whole_part_and_no_temporary(tmp_path, sample_xml):
    """As Dask runs the task of a worker that died again on another: the dead one's temporary is
    never a part, the two runs write the same part, and the published table holds only that."""
    tasks, templates_file, namespaces = range_tasks(tmp_path, sample_xml)
    wikipedia._load_templates_file(str(templates_file), namespaces)  # this process runs the task
    try:
        with atomic_folder(tmp_path / "docs") as building:
            task = (*tasks[1], str(building), "part-000-000001", "wikipedia")
            killed = multiprocessing.get_context("fork").Process(target=die_while_writing, args=(task,))
            killed.start()
            killed.join()
            assert killed.exitcode == -signal.SIGKILL
            (temporary,) = building.iterdir()
            assert temporary.name.startswith(f".part-000-000001-00000.parquet.tmp-{killed.pid}@{HOST}-")
            first = wikipedia._range_articles(*task)
            written = (building / "part-000-000001-00000.parquet").read_bytes()
            assert wikipedia._range_articles(*task) == first  # and once more
            assert (building / "part-000-000001-00000.parquet").read_bytes() == written
            assert sorted(p.name for p in building.iterdir()) == [
                temporary.name,
                "part-000-000001-00000.parquet",
            ]
    finally:
        wikipedia._worker_state.clear()
    assert [p.name for p in (tmp_path / "docs").iterdir()] == ["part-000-000001-00000.parquet"]
    assert len(documents(tmp_path / "docs")) == first[0] > 0


# ---- bad multistream dumps: one line naming the file and the byte offset, nothing published ----


def expect_error(tmp_path: Path, message: str) -> None:
    with pytest.raises(UserError) as error:
        extract_wikipedia(tmp_path / "raw", tmp_path / "out/docs", "wikipedia", compute=2)
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
    stats = extract_wikipedia(tmp_path / "raw", tmp_path / "docs", "wikipedia", compute=1)
    assert stats.pages == 354 and stats.documents == 295
