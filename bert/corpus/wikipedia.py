"""Wikipedia dump (MediaWiki XML, .xml or .xml.bz2) -> document table of plain-text articles.

The wikitext of each article is cleaned by wikiextractor's `Extractor` (templates expanded from
the dump's own Template: pages, links reduced to their labels, tables, lists and headings
dropped), run on worker processes of ours (bert.parallel), not wikiextractor's own. We read the XML ourselves with a real XML parser
instead of wikiextractor's line-by-line regex reader, because that reader
  - cannot tell a malformed or truncated file from a good one (it just yields less),
  - learns the Template namespace only from <siteinfo>, and without one silently writes zero
    articles (so we supply the standard MediaWiki namespaces when <siteinfo> is missing),
  - has no notion of disambiguation pages.
Like wikiextractor we make two passes over the dump: the first collects the templates (and
checks that the whole file parses, before anything is written), the second extracts articles.
"""

import bz2
import logging
import os
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from xml.sax.saxutils import escape

from tqdm import tqdm
from wikiextractor import extract as wikiextractor
from wikiextractor import template_blob

from bert.atomic import atomic_folder
from bert.corpus.documents import DocumentWriter
from bert.errors import UserError
from bert.parallel import Workers

log = logging.getLogger(__name__)

DUMP_SUFFIXES = (".xml", ".xml.bz2")

# The namespaces every MediaWiki wiki has (English names), used when a dump has no <siteinfo>.
STANDARD_NAMESPACES = {
    -2: "Media", -1: "Special", 0: "", 1: "Talk", 2: "User", 3: "User talk", 4: "Wikipedia",
    5: "Wikipedia talk", 6: "File", 7: "File talk", 8: "MediaWiki", 9: "MediaWiki talk",
    10: "Template", 11: "Template talk", 12: "Help", 13: "Help talk", 14: "Category",
    15: "Category talk", 100: "Portal", 101: "Portal talk", 118: "Draft", 119: "Draft talk",
    710: "TimedText", 711: "TimedText talk", 828: "Module", 829: "Module talk",
}  # fmt: skip
ARTICLE_NAMESPACE = 0
TEMPLATE_NAMESPACE = 10

# {{Disambiguation}}, {{Disambig|geo}}, {{Dab}}, {{Hndis}}, {{Human name disambiguation}}, ...
# but not the inline cleanup tag {{Disambiguation needed}} nor a hatnote such as
# {{Other uses|X (disambiguation)}}.
DISAMBIGUATION_TEMPLATE = re.compile(
    r"\{\{\s*(?:[^{}|]*\s)?(?:disambiguation|disambig|disamb|dab|hndis|geodis|numberdis)\s*(?:\||\}\})",
    re.IGNORECASE,
)


@dataclass
class Page:
    page_id: str
    revision_id: str
    title: str
    namespace: int
    redirect: bool
    text: str


@dataclass
class ExtractStats:
    files: int = 0
    pages: int = 0
    documents: int = 0
    xml_bytes: int = 0
    input_bytes: int = 0
    seconds: float = 0.0
    skipped: Counter = field(default_factory=Counter)

    def metrics(self) -> dict:
        seconds = max(self.seconds, 1e-9)
        return {
            "files": self.files,
            "pages": self.pages,
            "documents": self.documents,
            "skipped": dict(sorted(self.skipped.items())),
            "xml_megabytes": round(self.xml_bytes / 1e6, 3),
            "seconds": round(self.seconds, 3),
            "pages_per_second": round(self.pages / seconds, 1),
            "megabytes_per_second": round(self.xml_bytes / 1e6 / seconds, 3),
        }


class _CountingReader:
    """A binary file wrapper that counts the (decompressed) bytes read through it."""

    def __init__(self, file):
        self.file = file
        self.bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.bytes += len(data)
        return data


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


class DumpReader:
    """Streams the pages of one MediaWiki XML export; learns namespaces from <siteinfo>."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.namespaces: dict[int, str] = dict(STANDARD_NAMESPACES)
        self.has_siteinfo = False
        self.xml_bytes = 0

    def pages(self) -> Iterator[Page]:
        opener = bz2.open if self.path.name.endswith(".bz2") else open
        count = 0
        try:
            with opener(self.path, "rb") as raw:
                reader = _CountingReader(raw)
                root = None
                for event, element in ET.iterparse(reader, events=("start", "end")):
                    if root is None:
                        root = element
                        continue
                    if event != "end":
                        continue
                    tag = _local(element.tag)
                    if tag == "siteinfo":
                        self._read_siteinfo(element)
                        root.clear()
                    elif tag == "page":
                        count += 1
                        yield self._page(element)
                        root.clear()
                self.xml_bytes = reader.bytes
        except ET.ParseError as error:
            line, column = error.position
            reason = str(error).split(":")[0]
            if count == 0 and self._looks_like_html():
                raise UserError(
                    f"{self.path}: an HTML page, not a MediaWiki XML export (a web server's error page?): "
                    "check the source URL and download it again"
                ) from None
            raise UserError(
                f"{self.path}: malformed XML at line {line}, column {column} ({reason}) after {count} pages; "
                "the file is corrupt, truncated or not UTF-8: download it again"
            ) from None
        except EOFError:
            raise UserError(
                f"{self.path}: the bz2 stream ends early (truncated after {count} pages); "
                "the download is incomplete: download it again"
            ) from None
        except OSError as error:
            raise UserError(f"{self.path}: cannot read ({error}) after {count} pages") from None

    def _looks_like_html(self) -> bool:
        opener = bz2.open if self.path.name.endswith(".bz2") else open
        try:
            with opener(self.path, "rb") as file:
                start = file.read(1024).lower()
        except (OSError, EOFError):
            return False
        return b"<!doctype html" in start or b"<html" in start

    def _read_siteinfo(self, element: ET.Element) -> None:
        self.has_siteinfo = True
        for child in element.iter():
            if _local(child.tag) == "namespace" and child.get("key") is not None:
                self.namespaces[int(child.get("key"))] = child.text or ""

    def _page(self, element: ET.Element) -> Page:
        page_id = revision_id = title = text = ""
        namespace = None
        redirect = False
        for child in element:
            tag = _local(child.tag)
            if tag == "title":
                title = child.text or ""
            elif tag == "ns":
                namespace = self._namespace_number(child.text, title)
            elif tag == "id":
                page_id = child.text or ""
            elif tag == "redirect":
                redirect = True
            elif tag == "revision":
                for part in child:
                    part_tag = _local(part.tag)
                    if part_tag == "id":
                        revision_id = part.text or ""
                    elif part_tag == "text":
                        text = part.text or ""
        if namespace is None:  # exports older than schema 0.5 have no <ns>
            namespace = self._namespace_of(title)
        return Page(page_id, revision_id, title, namespace, redirect, text)

    def _namespace_number(self, text: str | None, title: str) -> int:
        try:
            return int(text or "")
        except ValueError:
            raise UserError(
                f"{self.path}: page {title!r} has <ns>{text or ''}</ns>, not a namespace number; "
                "the dump is corrupt or not a MediaWiki export: download it again"
            ) from None

    def _namespace_of(self, title: str) -> int:
        prefix, colon, _ = title.partition(":")
        if colon:
            for key, name in self.namespaces.items():
                if name and name.lower() == prefix.lower():
                    return key
        return ARTICLE_NAMESPACE


def skip_reason(page: Page) -> str | None:
    """Why a page is not an article document (None when it is one)."""
    if page.namespace != ARTICLE_NAMESPACE:
        return "other_namespace"
    if page.redirect or page.text.lstrip()[:9].lower() == "#redirect":
        return "redirect"
    if page.title.endswith("(disambiguation)") or DISAMBIGUATION_TEMPLATE.search(page.text):
        return "disambiguation"
    return None


def find_dumps(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise UserError(f"{folder}: not found; run `dvc repro download@{folder.name}` first")
    dumps = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(DUMP_SUFFIXES))
    if not dumps:
        raise UserError(f"{folder}: no Wikipedia dump (*.xml or *.xml.bz2) in this folder")
    return dumps


# State of the extraction workers: set in the parent before the workers fork, so every worker
# shares the templates (in shared memory) without pickling them.
_worker_state: dict = {}
ARTICLES_PER_TASK = 8


def _extract_articles(jobs: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str | None]]:
    return [_extract_article(*job) for job in jobs]


def _batches(items: Iterable, size: int) -> Iterator[list]:
    items = iter(items)
    while batch := list(islice(items, size)):
        yield batch


# MediaWiki stops expanding a page's templates past fixed limits (preprocessor node count,
# post-expand include size); wikiextractor only limits the nesting depth, so a few chained templates
# that each call the next ten times make 10^8 expansions and the stage never ends. We give each page
# a budget of template expansions and of expanded characters, counted (not timed) so that whether a
# page is skipped does not depend on the machine, and skip the pages that exceed it.
TEMPLATE_EXPANSIONS_PER_PAGE = 100_000
EXPANDED_CHARACTERS_PER_PAGE = 20_000_000


class BudgetedExtractor(wikiextractor.Extractor):
    """wikiextractor's Extractor with a per-page budget of template expansions: once it is spent,
    every further template expands to nothing (at once) and `over_budget` is set."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.expansions = 0
        self.expanded_characters = 0
        self.over_budget = False

    def expandTemplate(self, body):
        self.expansions += 1
        if self.expansions > TEMPLATE_EXPANSIONS_PER_PAGE:
            self.over_budget = True
        if self.over_budget:
            return ""
        value = super().expandTemplate(body)
        self.expanded_characters += len(value)
        if self.expanded_characters > EXPANDED_CHARACTERS_PER_PAGE:
            self.over_budget = True
            return ""
        return value


def _extract_article(
    page_id: str, revision_id: str, title: str, wikitext: str
) -> tuple[str, str, str | None]:
    """(page id, title, plain text), the text None when the page's templates exceed the budget."""
    state = _worker_state
    extractor = BudgetedExtractor(
        page_id,
        revision_id,
        "",
        title,
        [],
        templates=state["templates"],
        redirects=state["redirects"],
        templatePrefix=state["template_prefix"],
        knownNamespaces=state["known_namespaces"],
        ignored_tag_patterns=state["ignored_tags"],
        keepSections=False,
    )
    # wikiextractor expects the text as it appears in the XML file, entities still escaped.
    paragraphs = extractor.clean_text(escape(wikitext), html_safe=False)
    if extractor.over_budget:
        return page_id, title, None
    return page_id, title, "\n".join(line.strip() for line in paragraphs if line.strip())


def _load_templates(
    reader: DumpReader, progress: tqdm
) -> tuple[template_blob.StreamingTemplateBlobBuilder, ...]:
    templates = template_blob.StreamingTemplateBlobBuilder()
    redirects = template_blob.StreamingTemplateBlobBuilder()
    pages = 0
    for page in reader.pages():
        pages += 1
        progress.update()
        if page.namespace == TEMPLATE_NAMESPACE:
            resolved = wikiextractor.resolve_template_page(page.title, [escape(page.text)])
            if resolved is not None:
                kind, value = resolved
                (redirects if kind == "redirect" else templates).add(page.title, value)
    return templates, redirects, pages


def extract_dump(
    path: Path, writer: DocumentWriter, processes: int, stats: ExtractStats, corpus: str
) -> None:
    """Extract the articles of one dump into `writer`, in dump order."""
    reader = DumpReader(path)
    with tqdm(desc=f"templates {path.name}", unit=" pages", leave=False) as progress:
        templates, redirects, total_pages = _load_templates(reader, progress)
    if total_pages == 0:
        raise UserError(f"{path}: the dump contains no <page> elements; is it a MediaWiki XML export?")
    if not reader.has_siteinfo:
        log.info("%s has no <siteinfo>: using the standard MediaWiki namespaces", path.name)
    template_name = reader.namespaces.get(TEMPLATE_NAMESPACE, "Template")
    documents_before = stats.documents
    skipped = Counter()

    def articles() -> Iterator[tuple[str, str, str, str]]:
        for page in reader.pages():
            reason = skip_reason(page)
            if reason:
                skipped[reason] += 1
            else:
                yield page.page_id, page.revision_id, page.title, page.text

    with (
        template_blob.compact_blobs(*templates.finish()) as (template_view, _),
        template_blob.compact_blobs(*redirects.finish()) as (redirect_view, _),
    ):
        _worker_state.update(
            templates=template_view,
            redirects=redirect_view,
            template_prefix=template_name + ":",
            known_namespaces={name for name in reader.namespaces.values() if name},
            ignored_tags=[*wikiextractor._DEFAULT_IGNORED_TAG_PATTERNS, wikiextractor.ignoreTag("a")],
        )
        tasks = ((batch,) for batch in _batches(articles(), ARTICLES_PER_TASK))
        with (
            Workers(processes) as workers,
            tqdm(desc=f"extract {path.name}", unit=" articles", leave=False) as progress,
        ):
            batches = workers.map(
                _extract_articles, tasks, describe=lambda task: f"pages from id {task[0][0][0]} of {path}"
            )
            for page_id, title, text in (article for batch in batches for article in batch):
                progress.update()
                if text is None:
                    skipped["template_budget"] += 1
                    log.warning(
                        "%s: page %s (%r) skipped: its templates expand past %d expansions or %d characters",
                        path.name, page_id, title, TEMPLATE_EXPANSIONS_PER_PAGE, EXPANDED_CHARACTERS_PER_PAGE,
                    )  # fmt: skip
                elif text:
                    writer.add(corpus, f"{corpus}:{page_id}", title, text)
                    stats.documents += 1
                else:
                    skipped["empty"] += 1
        _worker_state.clear()

    stats.files += 1
    stats.pages += total_pages
    stats.xml_bytes += reader.xml_bytes
    stats.input_bytes += path.stat().st_size
    stats.skipped.update(skipped)
    found = stats.documents - documents_before
    if found == 0:
        summary = ", ".join(f"{count} {reason}" for reason, count in sorted(skipped.items())) or "nothing"
        raise UserError(
            f"{path}: {total_pages} pages but no article text was extracted (skipped: {summary}); "
            "is this a pages-articles dump?"
        )
    log.info("%s: %d pages -> %d documents (skipped: %s)", path.name, total_pages, found, dict(skipped))


def extract_wikipedia(
    input_path: str | Path, out_dir: str | Path, processes: int, corpus: str
) -> ExtractStats:
    """Extract every dump under `input_path` into the document table `out_dir` (atomically), with
    ids `<corpus>:<page id>`."""
    dumps = find_dumps(input_path)
    processes = processes or os.cpu_count() or 1
    stats = ExtractStats()
    start = time.perf_counter()
    with atomic_folder(out_dir) as tmp_dir:
        writer = DocumentWriter(tmp_dir)
        for dump in dumps:
            extract_dump(dump, writer, processes, stats, corpus)
        writer.close()
    stats.seconds = time.perf_counter() - start
    return stats
