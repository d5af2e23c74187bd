"""The bundled sample world: real formats, exact answer spans, held-out dev, byte-identical output."""

import bz2
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sample_world.__main__ import main
from sample_world.books import BOOKS_PARQUET
from sample_world.generate import generate
from sample_world.squad import SQUAD_FILES
from sample_world.wiki_xml import DUMP_NAME, INDEX_NAME, PAGES_PER_STREAM, mediawiki_sha1

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
DUMP = SAMPLE / "wikipedia" / DUMP_NAME
INDEX = SAMPLE / "wikipedia" / INDEX_NAME
NS = "{http://www.mediawiki.org/xml/export-0.11/}"
SQUAD = {
    (version, split): SAMPLE / "squad" / version / name
    for version, names in SQUAD_FILES.items()
    for split, name in zip(("train", "dev"), names)
}


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def pages() -> list[dict]:
    found = []
    with bz2.open(DUMP) as f:
        for _, elem in ET.iterparse(f):
            if elem.tag == NS + "page":
                text = elem.find(f"{NS}revision/{NS}text")
                found.append(
                    {
                        "title": elem.findtext(NS + "title"),
                        "ns": int(elem.findtext(NS + "ns")),
                        "id": elem.findtext(NS + "id"),
                        "redirect": elem.find(NS + "redirect"),
                        "text": text.text or "",
                        "attrib": text.attrib,
                        "sha1": elem.findtext(f"{NS}revision/{NS}sha1"),
                        "model": elem.findtext(f"{NS}revision/{NS}model"),
                        "format": elem.findtext(f"{NS}revision/{NS}format"),
                        "timestamp": elem.findtext(f"{NS}revision/{NS}timestamp"),
                    }
                )
                elem.clear()
    return found


@pytest.fixture(scope="module")
def squad() -> dict:
    return {key: json.loads(path.read_text(encoding="utf-8")) for key, path in SQUAD.items()}


def _qas(doc):
    for article in doc["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield article, paragraph, qa


def test_dump_is_a_mediawiki_export_with_siteinfo(pages):
    with bz2.open(DUMP) as f:
        root = ET.parse(f).getroot()
    assert root.tag == NS + "mediawiki" and root.get("version") == "0.11"
    site = root.find(NS + "siteinfo")
    for tag in ("sitename", "dbname", "base", "generator", "case"):
        assert site.findtext(NS + tag), tag
    namespaces = {int(n.get("key")): (n.text or "") for n in site.find(NS + "namespaces")}
    assert {
        0: "",
        1: "Talk",
        4: "Wikipedia",
        6: "File",
        10: "Template",
        14: "Category",
    }.items() <= namespaces.items()
    for page in pages:
        assert (
            page["id"]
            and page["timestamp"]
            and page["model"] == "wikitext"
            and page["format"] == "text/x-wiki"
        )
        assert int(page["attrib"]["bytes"]) == len(page["text"].encode("utf-8"))
        assert page["sha1"] == page["attrib"]["sha1"] == mediawiki_sha1(page["text"])
        assert page["attrib"]["{http://www.w3.org/XML/1998/namespace}space"] == "preserve"


def test_dump_is_multistream_with_an_index_of_every_page(pages):
    """As Wikimedia writes it: a stream for <siteinfo>, streams of 100 pages, a stream for
    </mediawiki>; the index lists each page (id, title) at the byte offset of its stream."""
    data = DUMP.read_bytes()
    streams, position = [], 0
    while position < len(data):
        decompressor = bz2.BZ2Decompressor()
        streams.append((position, decompressor.decompress(data[position:])))
        assert decompressor.eof
        position = len(data) - len(decompressor.unused_data)
    assert b"".join(xml for _, xml in streams) == bz2.decompress(data)
    assert streams[0][1].rstrip().endswith(b"</siteinfo>") and streams[-1][1].strip() == b"</mediawiki>"
    index = [line.split(":", 2) for line in bz2.decompress(INDEX.read_bytes()).decode("utf-8").splitlines()]
    assert [(page_id, title) for _, page_id, title in index] == [(p["id"], p["title"]) for p in pages]
    page_streams = streams[1:-1]
    assert [int(offset) for offset, _, _ in index] == [
        offset for number, (offset, _) in enumerate(page_streams)
        for _ in range(min(PAGES_PER_STREAM, len(pages) - number * PAGES_PER_STREAM))
    ]  # fmt: skip
    assert all(xml.count(b"<page>") == PAGES_PER_STREAM for _, xml in page_streams[:-1])


def test_dump_has_articles_redirects_and_other_namespaces(pages):
    articles = [p for p in pages if p["ns"] == 0 and p["redirect"] is None]
    redirects = [p for p in pages if p["redirect"] is not None]
    assert 280 <= len(articles) <= 320
    assert 25 <= len(redirects) <= 35
    assert all(p["text"].startswith("#REDIRECT [[" + p["redirect"].get("title") + "]]") for p in redirects)
    titles = {p["title"] for p in pages}
    assert all(p["redirect"].get("title") in titles for p in redirects)
    assert {p["ns"] for p in pages} >= {0, 1, 4, 6, 10, 14}
    assert "Template:Infobox person" in titles and any(t.startswith("Category:") for t in titles)
    assert any("{{Disambiguation" in p["text"] for p in articles)


def test_articles_use_real_wikitext_markup(pages):
    text = "\n".join(p["text"] for p in pages if p["ns"] == 0 and p["redirect"] is None)
    for needle in (
        "{{Infobox person",
        "{{birth date|",
        "{{marriage|[[",
        "'''",
        "\n== ",
        "\n* ",
        '{| class="wikitable',
        "<ref>",
        '<ref name="',
        '" />',
        "[[Category:",
        "&nbsp;",
        "&ndash;",
        "{{Reflist}}",
    ):
        assert needle in text, needle
    assert re.search(r"\[\[[^]|]+\|[^]]+\]\]", text), "no [[Target|label]] link"
    assert re.search(r"[^']''[^']+''[^']", text), "no ''italic''"
    assert re.search(
        r"\{\{Infobox person\n(\|.*\n)*\| birth_date += \{\{birth date\|\d{4}\|\d+\|\d+\}\}", text
    )
    for name in ("Łódźberg", "São Miguel", "St. Aldric"):
        assert name in text
    assert any(ord(c) > 127 for c in text)
    raw = bz2.decompress(DUMP.read_bytes()).decode("utf-8")
    assert "&amp;nbsp;&amp;ndash;" in raw and "&lt;ref" in raw  # entities escaped once more inside the XML


def test_articles_have_paragraphs_with_abbreviations(pages):
    articles = [
        p for p in pages if p["ns"] == 0 and p["redirect"] is None and "{{Disambiguation" not in p["text"]
    ]
    prose = [
        line for p in articles for line in p["text"].split("\n") if re.match(r"^(The )?'''|^[A-Z][a-z]", line)
    ]
    assert len(prose) >= 3 * len(articles)
    joined = "\n".join(prose)
    for abbreviation in ("Dr. ", "U.S. ", "e.g. ", "St. ", "Mt. ", "Jr. "):
        assert abbreviation in joined, abbreviation


def test_wikiextractor_renders_every_squad_context(pages, squad, tmp_path):
    """The contexts are the prose paragraphs exactly as the extraction stage will see them."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "wikiextractor.WikiExtractor",
            str(DUMP),
            "--json",
            "-o",
            "-",
            "--processes",
            "1",
            "-q",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    docs = [json.loads(line) for line in out.splitlines()]
    extracted = {line for d in docs for line in d["text"].split("\n")}
    titles = {d["title"] for d in docs}
    articles = [p for p in pages if p["ns"] == 0 and p["redirect"] is None]
    assert titles == {p["title"] for p in articles}  # no redirect, no Template:/Talk:/Category: page
    missing = [
        p["context"]
        for doc in squad.values()
        for a in doc["data"]
        for p in a["paragraphs"]
        if p["context"] not in extracted
    ]
    assert not missing, missing[:3]


def test_books_exist_as_txt_and_as_one_parquet_text_column():
    txt = sorted((SAMPLE / "books" / "txt").glob("*.txt"))
    assert 25 <= len(txt) <= 40
    lines = [line for path in txt for line in path.read_text(encoding="utf-8").splitlines()]
    table = pq.read_table(SAMPLE / "books" / "parquet" / BOOKS_PARQUET)
    assert table.column_names == ["text"] and str(table.schema.field("text").type) == "string"
    assert table.column("text").to_pylist() == lines
    assert sum(p.stat().st_size for p in txt) > 400_000
    joined = "\n".join(lines)
    assert "Chapter 1" in joined and re.search(r'"[^"]+," [A-ZÀ-Ž][^ ]+ [^ ]+ (said|told|wrote)', joined)


def test_every_answer_occurs_at_its_answer_start(squad):
    for (version, split), doc in squad.items():
        assert doc["version"] == ("1.1" if version == "v1.1" else "v2.0")
        ids = set()
        for _, paragraph, qa in _qas(doc):
            assert qa["id"] not in ids and re.fullmatch(r"[0-9a-f]{24}", qa["id"])
            ids.add(qa["id"])
            assert qa["question"].endswith("?")
            spans = qa["answers"] + qa.get("plausible_answers", [])
            assert spans, qa
            for answer in spans:
                start = answer["answer_start"]
                assert paragraph["context"][start : start + len(answer["text"])] == answer["text"], (
                    qa,
                    paragraph["context"],
                )
            if split == "dev" and qa["answers"]:
                assert len(qa["answers"]) == 3


def test_question_counts_and_unanswerable_share(squad):
    counts = {key: sum(1 for _ in _qas(doc)) for key, doc in squad.items()}
    for version in SQUAD_FILES:
        assert 1500 <= counts[(version, "train")] <= 2500, counts
        assert 300 <= counts[(version, "dev")] <= 500, counts
    for split in ("train", "dev"):
        qas = [qa for _, _, qa in _qas(squad[("v2.0", split)])]
        impossible = [qa for qa in qas if qa["is_impossible"]]
        assert 0.25 <= len(impossible) / len(qas) <= 0.4
        assert all(qa["answers"] == [] and len(qa["plausible_answers"]) == 1 for qa in impossible)
        assert all(qa["answers"] and "plausible_answers" not in qa for qa in qas if not qa["is_impossible"])
    assert not any("is_impossible" in qa for _, _, qa in _qas(squad[("v1.1", "train")]))


def test_dev_asks_about_held_out_entities(squad):
    for version in SQUAD_FILES:
        train = {a["title"] for a in squad[(version, "train")]["data"]}
        dev = {a["title"] for a in squad[(version, "dev")]["data"]}
        assert dev and not train & dev


def test_dev_facts_are_stated_in_the_books():
    """Pretraining can help: each dev answer is in a book paragraph that names its subject."""
    _, summary = generate(0)
    lines = pq.read_table(SAMPLE / "books" / "parquet" / BOOKS_PARQUET).column("text").to_pylist()
    dev = [f for f in summary["qa_facts"] if f["split"] == "dev"]
    assert len(dev) >= 300
    missing = [f for f in dev if not any(f["subject"] in line and f["answer"] in line for line in lines)]
    assert not missing, missing[:3]
    dev_ids = {qa["id"] for _, _, qa in _qas(json.loads(SQUAD[("v1.1", "dev")].read_text(encoding="utf-8")))}
    assert dev_ids == {f["id"] for f in dev}


def test_regeneration_is_byte_identical_and_matches_the_committed_data(tmp_path):
    main(["--out", str(tmp_path / "a"), "--seed", "0"])
    main(["--out", str(tmp_path / "b"), "--seed", "0"])
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert a == b
    committed = _files(SAMPLE)
    assert committed.keys() == a.keys(), (
        "data/sample is stale: run python -m sample_world --out data/sample --seed 0"
    )
    assert [k for k in a if a[k] != committed[k]] == []


def test_another_seed_gives_another_world(tmp_path):
    zero, _ = generate(0)
    one, _ = generate(1)
    for path in (
        "wikipedia/" + DUMP_NAME,
        "books/parquet/" + BOOKS_PARQUET,
        "squad/v2.0/dev-v2.0.json",
    ):
        assert zero[path] != one[path]
    main(["--out", str(tmp_path), "--seed", "1"])
    main(["--out", str(tmp_path), "--seed", "0"])
    assert _files(tmp_path) == _files(SAMPLE)  # books of seed 1 do not linger


def test_unwritable_output_is_one_clear_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = subprocess.run(
        [sys.executable, "-m", "sample_world", "--out", str(blocker / "sample")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and str(blocker / "sample") in err[0]
