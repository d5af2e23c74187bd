"""The MediaWiki XML export (version 0.11, like enwiki's): the articles, with disambiguation
pages, redirects and pages outside the article namespace, which the extraction must skip; written
as Wikimedia writes its multistream dumps, with their index."""

import bz2
import hashlib
import random
import re
from html import unescape

from sample_world.articles import Article
from sample_world.names import ascii_fold
from sample_world.world import Entity, World

DUMP_NAME = "samplewiki-20260101-pages-articles-multistream.xml.bz2"
INDEX_NAME = "samplewiki-20260101-pages-articles-multistream-index.txt.bz2"
PAGES_PER_STREAM = 100  # as in Wikimedia's dumps

EDITORS = [
    "Asparagusus",
    "Quillwright",
    "Marginalia42",
    "TessalyBot",
    "Ødegaard-ed",
    "Citoyenne",
    "Lanternfish",
    "Heronwatch",
]


NAMESPACES = [
    (-2, "Media"),
    (-1, "Special"),
    (0, ""),
    (1, "Talk"),
    (2, "User"),
    (3, "User talk"),
    (4, "Wikipedia"),
    (5, "Wikipedia talk"),
    (6, "File"),
    (7, "File talk"),
    (8, "MediaWiki"),
    (9, "MediaWiki talk"),
    (10, "Template"),
    (11, "Template talk"),
    (12, "Help"),
    (13, "Help talk"),
    (14, "Category"),
    (15, "Category talk"),
    (100, "Portal"),
    (101, "Portal talk"),
    (118, "Draft"),
    (119, "Draft talk"),
    (710, "TimedText"),
    (711, "TimedText talk"),
    (828, "Module"),
    (829, "Module talk"),
]


def xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mediawiki_sha1(text: str) -> str:
    """The base-36 SHA-1 MediaWiki writes into dumps (31 digits, zero-padded)."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while n:
        n, r = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
    return digits.rjust(31, "0")


def page_xml(
    rng: random.Random, page_id: int, title: str, ns: int, text: str, redirect: str | None = None
) -> str:
    sha1 = mediawiki_sha1(text)
    stamp = f"{rng.randint(2023, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
    rev = 1_200_000_000 + page_id * 97 + rng.randint(0, 96)
    editor = rng.choice(EDITORS)
    return (
        f"  <page>\n    <title>{xml_escape(title)}</title>\n    <ns>{ns}</ns>\n    <id>{page_id}</id>\n"
        + (
            f'    <redirect title="{xml_escape(redirect).replace(chr(34), "&quot;")}" />\n'
            if redirect
            else ""
        )
        + f"    <revision>\n      <id>{rev}</id>\n      <parentid>{rev - rng.randint(1, 5000)}</parentid>\n"
        f"      <timestamp>{stamp}</timestamp>\n      <contributor>\n        <username>{xml_escape(editor)}</username>\n"
        f"        <id>{40_000_000 + EDITORS.index(editor)}</id>\n      </contributor>\n"
        f"      <comment>{rng.choice(['copyedit', 'added citation', 'fix link', '/* History */ expand', 'cleanup'])}</comment>\n"
        f"      <origin>{rev}</origin>\n      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        f'      <text bytes="{len(text.encode("utf-8"))}" sha1="{sha1}" xml:space="preserve">{xml_escape(text)}</text>\n'
        f"      <sha1>{sha1}</sha1>\n    </revision>\n  </page>\n"
    )


INFOBOX_PERSON_TEMPLATE = """{{Infobox
| bodyclass  = biography vcard
| above      = {{{name|{{PAGENAME}}}}}
| image      = {{{image|}}}
| label1     = Born
| data1      = {{{birth_date|}}}{{#if:{{{birth_place|}}}|<br />{{{birth_place}}}}}
| label2     = Died
| data2      = {{{death_date|}}}
| label3     = Alma mater
| data3      = {{{alma_mater|}}}
| label4     = Occupation
| data4      = {{{occupation|}}}
| label5     = Spouse
| data5      = {{{spouse|}}}
}}<noinclude>
{{Documentation}}
</noinclude>"""


def support_pages(w: World, rng: random.Random) -> list[tuple[str, int, str]]:
    """Pages outside the article namespace (templates, categories, talk, project, file)."""
    pages = [
        ("Template:Infobox person", 10, INFOBOX_PERSON_TEMPLATE),
        (
            "Template:Birth date",
            10,
            "<includeonly>{{{3}}} {{MONTHNAME|{{{2}}}}} {{{1}}}</includeonly><noinclude>\n{{Documentation}}\n</noinclude>",
        ),
        (
            "Template:Reflist",
            10,
            '<div class="reflist">{{#tag:references|{{{refs|}}}|group={{{group|}}}}}</div><noinclude>{{Documentation}}</noinclude>',
        ),
        (
            "Template:Infobox settlement",
            10,
            "{{Infobox\n| above = {{{name|{{PAGENAME}}}}}\n| label1 = Population\n| data1 = {{{population_total|}}}\n}}<noinclude>{{Documentation}}</noinclude>",
        ),
        (
            "Template:Disambiguation",
            10,
            "This [[Wikipedia:Disambiguation|disambiguation]] page lists articles associated with the same title.<includeonly>[[Category:Disambiguation pages]]</includeonly>",
        ),
        (
            "Wikipedia:About",
            4,
            "'''Samplewiki''' is a small encyclopaedia about an invented world, generated for testing. This page must never appear in a training corpus.",
        ),
        (
            "Wikipedia:Manual of Style",
            4,
            "Write '''plain''' sentences. This project page must never appear in a training corpus.",
        ),
        ("File:Map of Veloria.svg", 6, "== Summary ==\nA map of Veloria.\n== Licensing ==\n{{PD-self}}"),
    ]
    for c in w.countries:
        pages.append(
            (
                f"Category:People from {c.title}",
                14,
                f"People born in [[{c.title}]].\n\n[[Category:{c.title}]]",
            )
        )
        pages.append(
            (f"Category:Towns in {c.title}", 14, f"Towns of [[{c.title}]].\n\n[[Category:{c.title}]]")
        )
    for e in rng.sample(w.people, 8):
        pages.append(
            (
                f"Talk:{e.title}",
                1,
                f"== Birth year ==\nIs the birth year right? This talk page must never appear in a training corpus. ~~~~\n:Yes, see the register. --[[User:{rng.choice(EDITORS)}]] 12:00, 1 May 2024 (UTC)",
            )
        )
    return pages


def disambiguation_pages(w: World) -> list[tuple[str, str]]:
    by_surname: dict[str, list[Entity]] = {}
    for p in w.people:
        by_surname.setdefault(p.attrs["surname"], []).append(p)
    shared = sorted(
        (s for s, ps in by_surname.items() if len(ps) >= 3), key=lambda s: (-len(by_surname[s]), s)
    )[:3]
    return [
        (
            f"{s} (surname)",
            f"'''{s}''' is a surname. Notable people with the surname include:\n"
            + "".join(
                f"* [[{p.title}]] (born {p.facts['birth_year']}), {p.facts['occupation']}\n"
                for p in by_surname[s]
            )
            + "\n{{Disambiguation|surname}}",
        )
        for s in shared
    ]


def redirect_pages(w: World, rng: random.Random) -> list[tuple[str, str]]:
    """~30 redirects: titles without diacritics (what people type) and surname-first forms."""
    taken = {e.title for e in w.all()}
    redirects = []
    for e in w.all():
        folded = ascii_fold(e.title)
        if folded != e.title and folded not in taken:
            redirects.append((folded, e.title, "R from title without diacritics"))
            taken.add(folded)
    rng.shuffle(redirects)
    redirects = sorted(redirects[:24], key=lambda r: r[1])
    for p in rng.sample(w.people, 6):
        given, rest = p.title.split(" ", 1)
        title = f"{rest}, {given}"
        if title not in taken:
            taken.add(title)
            redirects.append((title, p.title, "R from sort name"))
    return [
        (title, target, f"#REDIRECT [[{target}]]\n\n{{{{Redirect category shell|\n{{{{{cat}}}}}\n}}}}")
        for title, target, cat in redirects
    ]


def build_dump(w: World, articles: list[Article], rng: random.Random) -> bytes:
    header = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.11/ http://www.mediawiki.org/xml/export-0.11.xsd" '
        'version="0.11" xml:lang="en">\n  <siteinfo>\n    <sitename>Samplewiki</sitename>\n    <dbname>samplewiki</dbname>\n'
        "    <base>https://sample.wikipedia.example/wiki/Main_Page</base>\n    <generator>MediaWiki 1.46.0-wmf.9</generator>\n"
        "    <case>first-letter</case>\n    <namespaces>\n"
        + "".join(
            f'      <namespace key="{k}" case="first-letter"' + (f">{n}</namespace>\n" if n else " />\n")
            for k, n in NAMESPACES
        )
        + "    </namespaces>\n  </siteinfo>\n"
    )
    pages: list[tuple[str, int, str, str | None]] = [(a.entity.title, 0, a.wikitext, None) for a in articles]
    pages += [(title, 0, text, None) for title, text in disambiguation_pages(w)]
    pages += [(title, 0, text, target) for title, target, text in redirect_pages(w, rng)]
    pages += [(title, ns, text, None) for title, ns, text in support_pages(w, rng)]
    rng.shuffle(pages)  # real dumps interleave namespaces and redirects in page-id order
    body = "".join(
        page_xml(rng, 10 + 7 * i, title, ns, text, target)
        for i, (title, ns, text, target) in enumerate(pages)
    )
    return (header + body + "</mediawiki>\n").encode("utf-8")


PAGE = re.compile(rb"[ ]*<page>.*?</page>\n?", re.DOTALL)
TITLE_AND_ID = re.compile(rb"<title>(.*?)</title>.*?<id>(\d+)</id>", re.DOTALL)


def multistream(xml: bytes, pages_per_stream: int = PAGES_PER_STREAM) -> tuple[bytes, bytes]:
    """A MediaWiki XML document as Wikimedia writes a `-multistream.xml.bz2` dump and its
    `-multistream-index.txt.bz2`: one bz2 stream with what precedes the first <page> (the
    <siteinfo> header), one per `pages_per_stream` pages, one with what follows the last page
    (</mediawiki>); an index line `offset:page_id:title` per page, offset being the byte where its
    stream starts. The streams decompress, one after another, to `xml` itself."""
    pages = list(PAGE.finditer(xml))
    chunks = [xml[: pages[0].start()]]
    chunks += [xml[group[0].start() : group[-1].end()] for group in _groups(pages, pages_per_stream)]
    chunks.append(xml[pages[-1].end() :])
    dump, index_lines = b"", []
    for number, chunk in enumerate(chunks):
        if 0 < number < len(chunks) - 1:
            for title, page_id in TITLE_AND_ID.findall(chunk):
                index_lines.append(f"{len(dump)}:{page_id.decode()}:{unescape(title.decode('utf-8'))}\n")
        dump += bz2.compress(chunk, compresslevel=9)
    return dump, bz2.compress("".join(index_lines).encode("utf-8"), compresslevel=9)


def _groups(items: list, size: int) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]
