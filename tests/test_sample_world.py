"""The bundled sample world: real formats, exact answer spans, held-out dev, byte-identical output."""

import bz2
import csv
import io
import json
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sample_world.__main__ import main
from sample_world.articles import write_article
from sample_world.books import BOOKS_PARQUET
from sample_world.generate import generate
from sample_world.glue import sst_style
from sample_world.names import slugify
from sample_world.squad import SQUAD_FILES
from sample_world.wiki_xml import DUMP_NAME, INDEX_NAME, PAGES_PER_STREAM, mediawiki_sha1
from sample_world.world import build_world

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
        "swag/train.csv",
        "glue/MNLI/dev_matched.tsv",
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


# --- the fine-tuning sets: SWAG and GLUE --------------------------------------------------------

GLUE = SAMPLE / "glue"
GLUE_HEADERS = {  # task -> (header line or None, fields a row)
    "CoLA": (None, 4),
    "SST-2": ("sentence\tlabel", 2),
    "MRPC": ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String", 5),
    "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore", 10),
    "QQP": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", 6),
    "QNLI": ("index\tquestion\tsentence\tlabel", 4),
    "RTE": ("index\tsentence1\tsentence2\tlabel", 4),
}
MNLI_HEAD = (
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse"
    "\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1"
)
GLUE_HEADERS.update(
    {
        "MNLI/train": (MNLI_HEAD + "\tgold_label", 12),
        "MNLI/dev": (MNLI_HEAD + "\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label", 16),
    }
)
GLUE_SPLITS = {task: ("train", "dev") for task in GLUE_HEADERS if "/" not in task}
GLUE_SPLITS["MNLI"] = ("train", "dev_matched", "dev_mismatched")


def _glue(task: str, split: str) -> list[list[str]]:
    """The rows as GLUE's processors read them: lines split on tabs, no quoting, header dropped."""
    raw = (GLUE / task / f"{split}.tsv").read_bytes()
    assert raw.endswith(b"\n") and b"\r" not in raw and b'"' not in raw
    lines = raw.decode("utf-8").split("\n")[:-1]
    header, width = GLUE_HEADERS[
        task if task != "MNLI" else ("MNLI/train" if split == "train" else "MNLI/dev")
    ]
    if header is not None:
        assert lines.pop(0) == header, (task, split)
    rows = [line.split("\t") for line in lines]
    malformed = [row for row in rows if len(row) != width]
    if (task, split) == ("QQP", "train"):  # as in real QQP: question2 and is_duplicate missing
        assert len(malformed) == 2 and all(len(row) == 4 for row in malformed)
        return [row for row in rows if len(row) == width]
    assert not malformed, (task, split, malformed[:2])
    return rows


@pytest.fixture(scope="module")
def world():
    return build_world(0)


@pytest.fixture(scope="module")
def glue() -> dict:
    return {(task, split): _glue(task, split) for task, splits in GLUE_SPLITS.items() for split in splits}


def _share(rows, column, value) -> float:
    return sum(row[column] == value for row in rows) / len(rows)


def test_glue_files_parse_with_their_headers_sizes_and_label_shares(glue):
    assert sorted(p.relative_to(GLUE).as_posix() for p in GLUE.rglob("*.tsv")) == sorted(
        f"{task}/{split}.tsv" for task, split in glue
    )
    assert (GLUE / "MRPC" / "train.tsv").read_bytes().startswith(b"\xef\xbb\xbfQuality\t")
    for (task, split), rows in glue.items():
        expected = {"train": 900 if task == "MNLI" else 600}.get(split, 200)
        assert abs(len(rows) - expected) <= 3, (task, split, len(rows))
        if task == "CoLA":
            assert {(r[1], r[2]) for r in rows} == {("1", ""), ("0", "*")}
            assert 0.67 <= _share(rows, 1, "1") <= 0.73 and all(re.fullmatch(r"sw0\d", r[0]) for r in rows)
        elif task == "SST-2":
            assert {r[1] for r in rows} == {"0", "1"} and 0.45 <= _share(rows, 1, "1") <= 0.55
            assert all(r[0].endswith(" . ") and r[0] == r[0].lower() for r in rows)  # SST's tokenised text
        elif task == "MRPC":
            assert {r[0] for r in rows} == {"0", "1"} and 0.65 <= _share(rows, 0, "1") <= 0.71
            ids = {}
            for r in rows:
                for i, text in ((r[1], r[3]), (r[2], r[4])):
                    assert i.isdigit() and ids.setdefault(text, i) == i  # an ID names one sentence
        elif task == "QQP":
            assert {r[5] for r in rows} == {"0", "1"} and 0.34 <= _share(rows, 5, "1") <= 0.40
            assert all(r[3].endswith("?") and r[4].endswith("?") and r[3] != r[4] for r in rows)
        elif task in ("QNLI", "RTE"):
            assert [r[0] for r in rows] == [str(i) for i in range(len(rows))]
            assert {r[3] for r in rows} == {"entailment", "not_entailment"}
            assert 0.45 <= _share(rows, 3, "entailment") <= 0.55
        elif task == "MNLI":
            labels = ("entailment", "neutral", "contradiction")
            assert all(r[1] + r[-1][0] == r[2] for r in rows)  # pairID = promptID + the label's initial
            for label in labels:
                assert abs(_share(rows, -1, label) - 1 / 3) < 0.01
            genres = {"train": {"encyclopedia", "fiction"}, "dev_matched": {"encyclopedia", "fiction"}}
            assert {r[3] for r in rows} == genres.get(split, {"letters", "travel"})
            for r in rows:
                assert r[4].startswith("( ") and r[6].startswith("(ROOT (S ")
                assert r[4].count("(") == r[4].count(")") and r[6].count("(") == r[6].count(")")
                votes = r[10:-1]
                assert set(votes) <= set(labels) and votes.count(r[-1]) > len(votes) / 2


def test_stsb_scores_are_graded_over_the_whole_scale(glue):
    for split in ("train", "dev"):
        rows = glue[("STS-B", split)]
        assert {r[1] for r in rows} <= {"main-news", "main-captions", "main-forum"}
        assert all(r[5] == r[6] == "none" and r[0] == str(i) for i, r in enumerate(rows))
        scores = [float(r[9]) for r in rows]
        assert all(re.fullmatch(r"\d\.\d{3}", r[9]) for r in rows) and all(0 <= s <= 5 for s in scores)
        for grade in range(6):  # about a sixth of the pairs near each grade
            assert sum(abs(s - grade) <= 0.5 for s in scores) >= len(rows) / 10, (split, grade)


def test_swag_true_endings_come_next_in_the_article_and_false_ones_come_elsewhere(world):
    by_slug = {slugify(e.title): e for e in world.all()}
    rng = random.Random("0:wiki")  # the articles of the dump, written as generate() writes them
    prose = {  # title -> the article's prose, without the quotes and non-breaking spaces SWAG drops
        e.title: " ".join(text for text, _ in write_article(world, e, rng).paragraphs)
        .replace('"', "")
        .replace("\u00a0", " ")
        for e in world.all()
    }
    for split, size in (("train", 600), ("val", 200)):
        text = (SAMPLE / "swag" / f"{split}.csv").read_text(encoding="utf-8")
        assert text.startswith(
            ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
        )
        rows = list(csv.reader(io.StringIO(text)))[1:]
        assert len(rows) == size and [r[0] for r in rows] == [str(i) for i in range(size)]
        assert [sum(r[11] == str(k) for r in rows) for k in range(4)] == [size // 4] * 4
        for r in rows:
            e = by_slug[r[1].removeprefix("samplewiki_")]
            assert e.dev == (split == "val") and r[3] == f"{r[4]} {r[5]}" and r[6] in ("gold", "gen")
            assert r[2].isdigit()
            true = r[7 + int(r[11])]
            false = [r[7 + k] for k in range(4) if k != int(r[11])]
            assert len(set(false)) == 3 and true not in false
            article = prose[e.title]
            assert f"{r[4]} {r[5]} {true}" in article, r  # the sentence after the context, as written
            for ending in false:  # another sentence of the article, not the one after the context
                assert f" {ending}" in article and f"{r[4]} {r[5]} {ending}" not in article, (r, ending)


def test_dev_rows_are_about_held_out_entities(world, glue, squad):
    """Where a set is about entities, every dev row names a held-out one and every train row one
    that is not; QNLI follows SQuAD's split, and CoLA never uses a sentence in both splits."""
    titles = {
        held_out: [e.title for e in world.all() if e.kind != "country" and e.dev == held_out]
        for held_out in (False, True)
    }
    texts = {  # task -> the columns that hold text
        "SST-2": [0], "MRPC": [3, 4], "STS-B": [7, 8], "QQP": [3, 4], "MNLI": [8, 9], "RTE": [1, 2],
    }  # fmt: skip
    for (task, split), rows in glue.items():
        if task not in texts:
            continue
        names = titles[split != "train"]
        if task == "SST-2":  # reviews name a work ("the iron orchard") or its author, lower-cased
            works = [
                p.facts["work"] for p in world.people if "work" in p.facts and p.dev == (split != "train")
            ]
            names = [sst_style(t).strip() for t in names + works]
        for row in rows:
            joined = " ".join(row[c] for c in texts[task])
            assert any(name in joined for name in names), (task, split, joined)
    for split in ("train", "dev"):
        answers = {}  # QNLI: entailment exactly when the sentence holds the question's answer
        for _, _, qa in _qas(squad[("v1.1", split)]):
            answers.setdefault(qa["question"], set()).update(a["text"] for a in qa["answers"])
        for _, question, sentence, label in glue[("QNLI", split)]:
            assert any(a in sentence for a in answers[question]) == (label == "entailment")
    assert not {r[3] for r in glue[("CoLA", "train")]} & {r[3] for r in glue[("CoLA", "dev")]}
