import bz2
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bert.corpus import mediawiki, wikipedia
from bert.corpus.mediawiki import DumpReader
from bert.corpus.wikipedia import extract_wikipedia, skip_reason
from bert.errors import UserError
from tests.support.stage_workspace import write_params

REPO = Path(__file__).resolve().parents[2]

SITEINFO = """  <siteinfo>
    <sitename>Testwiki</sitename>
    <base>https://test.example/wiki/Main_Page</base>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
      <namespace key="10" case="first-letter">Template</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""


def page(page_id: int, title: str, text: str, ns: int = 0, redirect: str | None = None) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    redirect_tag = f'    <redirect title="{redirect}" />\n' if redirect else ""
    return (
        f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n{redirect_tag}"
        f"    <revision>\n      <id>{page_id}00</id>\n      <model>wikitext</model>\n"
        f'      <text bytes="{len(text)}" xml:space="preserve">{text}</text>\n    </revision>\n  </page>\n'
    )


ARTICLE = """{{Infobox person|name=Zoë Quill}}
'''Zoë Quill''' was a [[cartographer|map maker]] from [[Ærøskøbing]]. She drew {{Coast}} maps.

== Early life ==
Quill studied at the academy &amp; worked in the harbour.<ref>A source.</ref>
* a list item that must go
* another list item
{| class="wikitable"
| table cell that must go
|}
She retired in 1901.
[[Category:Cartographers]]"""

PAGES = [
    (1, "Zoë Quill", ARTICLE, 0, None),
    (2, "Quill", "#REDIRECT [[Zoë Quill]]", 0, "Zoë Quill"),
    (3, "Template:Coast", "<includeonly>coastal</includeonly><noinclude>doc</noinclude>", 10, None),
    (4, "Category:Cartographers", "People who draw maps.", 14, None),
    (5, "Talk:Zoë Quill", "Is she notable? I think so.", 1, None),
    (6, "Mercury", "'''Mercury''' may refer to:\n* [[Mercury (planet)]]\n* [[Mercury (element)]]\n{{disambiguation}}", 0, None),
    (7, "Harbour", "The '''harbour''' shelters ships. It was dredged in 1850.\n{{Disambiguation needed}}", 0, None),
]  # fmt: skip


def write_dump(path: Path, pages=PAGES, siteinfo: bool = True) -> Path:
    xml = '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">\n'
    xml += SITEINFO if siteinfo else ""
    xml += "".join(page(*p) for p in pages) + "</mediawiki>\n"
    data = xml.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bz2.compress(data) if path.name.endswith(".bz2") else data)
    return path


def read_documents(folder: Path) -> list[dict]:
    return pq.read_table(folder).to_pylist()


@pytest.mark.parametrize("siteinfo", [True, False])
@pytest.mark.parametrize("name", ["dump.xml", "dump.xml.bz2"])
def test_extracts_article_prose_only(tmp_path, siteinfo, name):
    write_dump(tmp_path / "raw" / name, siteinfo=siteinfo)
    stats = extract_wikipedia(tmp_path / "raw", tmp_path / "docs", "wikipedia", compute=1)
    docs = read_documents(tmp_path / "docs")
    assert [d["doc_id"] for d in docs] == ["wikipedia:1", "wikipedia:7"]
    assert {d["corpus"] for d in docs} == {"wikipedia"}
    quill = docs[0]
    assert quill["title"] == "Zoë Quill"
    paragraphs = quill["text"].split("\n")
    assert paragraphs[0] == "Zoë Quill was a map maker from Ærøskøbing. She drew coastal maps."
    assert "Quill studied at the academy & worked in the harbour." in paragraphs
    assert paragraphs[-1] == "She retired in 1901."
    for gone in ("Early life", "list item", "table cell", "Infobox", "A source", "Category"):
        assert gone not in quill["text"]
    assert stats.skipped == {"redirect": 1, "other_namespace": 3, "disambiguation": 1}
    assert stats.pages == 7 and stats.documents == 2


def test_same_output_with_one_or_two_processes(tmp_path, monkeypatch):
    """Tasks of ~100 characters of wikitext, each writing its own part: the same parts, named by
    their dump and task, whatever the number of workers."""
    monkeypatch.setattr(wikipedia, "TASK_CHARACTERS", 100)
    write_dump(tmp_path / "raw" / "a.xml", pages=PAGES * 1)
    write_dump(
        tmp_path / "raw" / "b.xml.bz2",
        pages=[(100 + i, f"Article {i}", f"Text number {i}. More.", 0, None) for i in range(40)],
    )
    extract_wikipedia(tmp_path / "raw", tmp_path / "one", "wikipedia", compute=1)
    extract_wikipedia(tmp_path / "raw", tmp_path / "two", "wikipedia", compute=2)
    one = {p.name: p.read_bytes() for p in sorted((tmp_path / "one").iterdir())}
    assert one == {p.name: p.read_bytes() for p in sorted((tmp_path / "two").iterdir())}
    # a.xml: Zoë Quill's page alone, then Mercury (no document) and Harbour; b: tasks of 5 pages of 20-21 characters
    assert list(one) == [
        "part-000-000000-00000.parquet",
        "part-000-000001-00000.parquet",
        *(f"part-001-{task:06d}-00000.parquet" for task in range(8)),
    ]
    assert len(read_documents(tmp_path / "two")) == 42


@pytest.mark.parametrize("decompressor", ["bz2", "indexed_bzip2"])
def test_single_stream_bz2_on_either_decompressor(tmp_path, monkeypatch, decompressor):
    """With indexed_bzip2 installed, a single-stream .bz2 is decompressed on `processes` threads:
    the same documents as bz2's, and a truncated file is still one line that says so."""
    opened = []
    if decompressor == "bz2":
        monkeypatch.setattr(mediawiki, "indexed_bzip2", None)
    else:
        indexed_bzip2 = pytest.importorskip("indexed_bzip2")
        real = indexed_bzip2.IndexedBzip2File

        def recording(path, **options):
            opened.append(options)
            return real(path, **options)

        monkeypatch.setattr(indexed_bzip2, "IndexedBzip2File", recording)
    pages = PAGES + [(100 + i, f"Article {i}", f"Text number {i}. More.", 0, None) for i in range(40)]
    write_dump(tmp_path / "xml/dump.xml", pages=pages)
    write_dump(tmp_path / "bz2/dump.xml.bz2", pages=pages)
    extract_wikipedia(tmp_path / "xml", tmp_path / "from-xml", "wikipedia", compute=2)
    extract_wikipedia(tmp_path / "bz2", tmp_path / "from-bz2", "wikipedia", compute=2)
    assert read_documents(tmp_path / "from-bz2") == read_documents(tmp_path / "from-xml")
    assert opened == ([{"parallelization": 2}] * 2 if decompressor == "indexed_bzip2" else [])
    dump = tmp_path / "bz2/dump.xml.bz2"
    dump.write_bytes(dump.read_bytes()[:-200])
    with pytest.raises(UserError, match=f"^{dump}: the bz2 stream (ends early|is truncated)"):
        extract_wikipedia(dump, tmp_path / "out/docs", "wikipedia", compute=2)
    assert not (tmp_path / "out/docs").exists()


def test_skip_reasons_from_siteinfo_less_titles(tmp_path):
    # A page without <ns> (old export schema) gets its namespace from the title prefix.
    dump = tmp_path / "old.xml"
    dump.write_text(
        "<mediawiki><page><title>Template:X</title><id>1</id><revision><id>2</id><text>x</text>"
        "</revision></page></mediawiki>",
        encoding="utf-8",
    )
    (only,) = list(DumpReader(dump).pages())
    assert only.namespace == 10 and skip_reason(only) == "other_namespace"


def test_real_70_page_dump(shared_data, tmp_path):
    stats = extract_wikipedia(
        shared_data / "enwiki-sample-70pages.xml.bz2", tmp_path / "docs", "wikipedia", compute=2
    )
    docs = {d["title"]: d["text"] for d in read_documents(tmp_path / "docs")}
    assert set(docs) == {"Anarchism", "Albedo", "A", "Alabama", "Achilles", "Abraham Lincoln"}
    assert docs["Anarchism"].startswith("Anarchism is a political philosophy and movement")
    assert "Albedo" in docs["Albedo"] and "sunlight" in docs["Albedo"]
    assert "16th president of the United States" in docs["Abraham Lincoln"]
    assert all(len(text) > 5000 and "[[" not in text and "{{" not in text for text in docs.values())
    assert stats.pages == 70 and stats.skipped == {"redirect": 64}
    assert "AccessibleComputing" not in docs


# ---- bad input: one clear message naming the file, no output left behind ----


def expect_error(tmp_path, dump: Path, *fragments: str) -> None:
    with pytest.raises(UserError) as error:
        extract_wikipedia(dump, tmp_path / "out" / "docs", "wikipedia", compute=1)
    message = str(error.value)
    assert str(dump) in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message
    assert not (tmp_path / "out" / "docs").exists()
    assert not [p for p in (tmp_path / "out").iterdir()]  # no temporary folder left either


def test_malformed_xml_names_line_and_column(tmp_path):
    dump = write_dump(tmp_path / "bad.xml")
    dump.write_text(dump.read_text(encoding="utf-8").replace("</title>", "</titel>", 2), encoding="utf-8")
    expect_error(tmp_path, dump, "malformed XML at line 13, column 22 (mismatched tag)")


def test_truncated_bz2(tmp_path):
    dump = write_dump(tmp_path / "cut.xml.bz2")
    dump.write_bytes(dump.read_bytes()[:-200])
    expect_error(tmp_path, dump, "truncated")


def test_invalid_utf8(tmp_path):
    dump = write_dump(tmp_path / "latin1.xml")
    dump.write_bytes(dump.read_bytes().replace("Zoë".encode(), b"Zo\xeb"))
    expect_error(tmp_path, dump, "malformed XML at line", "not UTF-8")


def test_dump_without_pages(tmp_path):
    expect_error(tmp_path, write_dump(tmp_path / "empty.xml", pages=[]), "no <page> elements")


def test_non_empty_dump_with_zero_documents(tmp_path):
    dump = write_dump(tmp_path / "redirects.xml", pages=PAGES[1:3])
    expect_error(tmp_path, dump, "2 pages but no article text", "1 redirect")


def test_folder_without_dumps(tmp_path):
    (tmp_path / "raw").mkdir()
    with pytest.raises(UserError, match="no Wikipedia dump"):
        extract_wikipedia(tmp_path / "raw", tmp_path / "docs", "wikipedia", compute=1)


def test_output_folder_that_cannot_be_created(tmp_path):
    dump = write_dump(tmp_path / "dump.xml")
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(
        UserError, match=r"file/docs: cannot write the output folder \(File exists: .*/file\)"
    ):
        extract_wikipedia(dump, tmp_path / "file" / "docs", "wikipedia", compute=1)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_folder(tmp_path):
    dump = write_dump(tmp_path / "dump.xml")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(UserError, match="cannot write the output folder"):
            extract_wikipedia(dump, locked / "docs", "wikipedia", compute=1)
    finally:
        locked.chmod(0o700)


def run_stage_in(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a stage as DVC does: from a project folder with its own params.yaml."""
    write_params(workdir)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )


def test_stage_reports_bad_dump_in_one_line(tmp_path):
    dump = write_dump(tmp_path / "data" / "raw" / "wikipedia" / "dump.xml")
    dump.write_bytes(dump.read_bytes()[:-300])
    result = run_stage_in(tmp_path, "stages.documents", "wikipedia")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: data/raw/wikipedia/dump.xml: malformed XML at line")
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "documents" / "wikipedia").exists()


def test_stage_writes_documents_and_metrics(tmp_path):
    write_dump(tmp_path / "data" / "raw" / "wikipedia" / "dump.xml.bz2", siteinfo=False)
    result = run_stage_in(tmp_path, "stages.documents", "wikipedia")
    assert result.returncode == 0, result.stderr
    import json

    metrics = json.loads((tmp_path / "metrics" / "documents_wikipedia.json").read_text())
    assert metrics["documents"] == 2 and metrics["pages"] == 7 and metrics["pages_per_second"] > 0
    assert len(read_documents(tmp_path / "data" / "documents" / "wikipedia")) == 2
