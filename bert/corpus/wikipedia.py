"""Wikipedia dump (MediaWiki XML) -> document table of plain-text articles.

The wikitext of each article is cleaned by wikiextractor's `Extractor` (templates expanded from
the dump's own Template: pages, links reduced to their labels, tables, lists and headings
dropped), run on worker processes of ours (bert.parallel), not wikiextractor's own. We read the
XML ourselves with a real XML parser (bert.corpus.mediawiki) instead of wikiextractor's
line-by-line regex reader, because that reader
  - cannot tell a malformed or truncated file from a good one (it just yields less),
  - learns the Template namespace only from <siteinfo>, and without one silently writes zero
    articles (so we supply the standard MediaWiki namespaces when <siteinfo> is missing),
  - has no notion of disambiguation pages.
Like wikiextractor we make two passes over the dump: the first collects the templates (and
checks that the whole file parses, before anything is written), the second extracts articles.

A multistream dump with its index is read in parallel end to end: each task of either pass is a
byte range of whole bz2 streams that a worker decompresses and parses itself; the tasks of the
template pass return the Template: pages of their range, which the main process merges in page
order into a file that the workers of the second pass load (by its path, in their initializer).
A dump in one stream (.xml, or .xml.bz2 without an index) cannot be cut: the main process reads it
and sends the articles' wikitext to the workers in tasks of about TASK_CHARACTERS. Either way each
task of the second pass writes its documents to its own part file of the table, named by the
task's place in the input (`part-<dump>-<task>-00000.parquet`), and returns only counts: the main
process lists the tasks and adds up what they found. Tasks take plain values (paths, offsets, page
ids) and nothing comes from the parent by fork, so they run the same under any start method or
task engine; what a task writes follows from its input alone, so the output is the same bytes
whatever the number of workers.
"""

import logging
import mmap
import os
import re
import struct
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from tqdm import tqdm
from wikiextractor import extract as wikiextractor
from wikiextractor import template_blob

from bert.atomic import atomic_folder
from bert.compute import Compute
from bert.corpus.documents import DocumentWriter
from bert.corpus.downloads import downloaded_files
from bert.corpus.mediawiki import (
    ARTICLE_NAMESPACE,
    INDEX_SUFFIX,
    TEMPLATE_NAMESPACE,
    DumpReader,
    Page,
    PageParser,
    StreamRangeReader,
    dump_of,
    index_of,
    index_streams,
    read_header,
    stream_ranges,
)
from bert.errors import UserError
from bert.parallel import ComputePool

log = logging.getLogger(__name__)

DUMP_SUFFIXES = (".xml", ".xml.bz2")
# Compressed bytes of a multistream dump per task: ~10 MB of XML, a few seconds of work, so memory
# stays bounded and enwiki makes thousands of tasks; the tasks follow from the file alone.
TASK_BYTES = 2 * 2**20
# Characters of wikitext per task when the main process reads a single-stream dump itself: about a
# multistream range's, so tasks, and parts, are alike on both paths. The main process holds the
# tasks queued ahead of the workers (bert.parallel.TASKS_AHEAD_PER_WORKER): ~32 MB per worker.
TASK_CHARACTERS = 8 * 2**20

# {{Disambiguation}}, {{Disambig|geo}}, {{Dab}}, {{Hndis}}, {{Human name disambiguation}}, ...
# but not the inline cleanup tag {{Disambiguation needed}} nor a hatnote such as
# {{Other uses|X (disambiguation)}}.
DISAMBIGUATION_TEMPLATE = re.compile(
    r"\{\{\s*(?:[^{}|]*\s)?(?:disambiguation|disambig|disamb|dab|hndis|geodis|numberdis)\s*(?:\||\}\})",
    re.IGNORECASE,
)


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
    """The dumps under `folder` (or `folder` itself, a file), in name order; a multistream index
    goes with its dump (bert.corpus.mediawiki.index_of)."""
    folder = Path(folder)
    tree = downloaded_files(folder)  # never a FIFO or a link out of it
    if not tree.is_folder:
        return [folder]
    files = tree.file_paths()
    for index in (p for p in files if p.name.endswith(INDEX_SUFFIX)):
        if not dump_of(index).is_file():
            raise UserError(
                f"{index}: a multistream index without its dump ({dump_of(index).name} is not beside it): "
                "download the dump too, or remove the index"
            )
    dumps = [p for p in files if p.name.endswith(DUMP_SUFFIXES)]
    if not dumps:
        raise UserError(f"{folder}: no Wikipedia dump (*.xml or *.xml.bz2) in this folder")
    return dumps


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


# ---- the templates, from the first pass to the workers of the second, through a file ------------


def _template_definition(page: Page) -> tuple[str, str, str] | None:
    """(kind, title, value) of a Template: page as wikiextractor stores it: ("template", its
    expandable text) or ("redirect", its target); None for any other page or an empty template."""
    if page.namespace != TEMPLATE_NAMESPACE:
        return None
    resolved = wikiextractor.resolve_template_page(page.title, [escape(page.text)])
    return None if resolved is None else (resolved[0], page.title, resolved[1])


TEMPLATES_FILE_HEADER = struct.Struct(">6Q")  # the lengths of the six blobs that follow


def _write_templates_file(path: Path, definitions: Iterable[tuple[str, str, str]]) -> None:
    """The templates and template redirects, in dump order, as the blobs of wikiextractor's
    template_blob (a sorted title index, titles, contents; for each of the two): the workers map
    the file and share its pages instead of each holding a copy (enwiki: ~900,000 templates)."""
    builders = {"template": template_blob.StreamingTemplateBlobBuilder(),
                "redirect": template_blob.StreamingTemplateBlobBuilder()}  # fmt: skip
    for kind, title, value in definitions:
        builders[kind].add(title, value)
    blobs = [*builders["template"].finish(), *builders["redirect"].finish()]
    with open(path, "wb") as file:
        file.write(TEMPLATES_FILE_HEADER.pack(*map(len, blobs)))
        for blob in blobs:
            file.write(blob)


# What _extract_article needs, loaded in each worker by _load_templates_file (the pool's initializer).
_worker_state: dict = {}


def _load_templates_file(path: str, namespaces: dict[int, str]) -> None:
    with open(path, "rb") as file:
        view = memoryview(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
    lengths = TEMPLATES_FILE_HEADER.unpack(view[: TEMPLATES_FILE_HEADER.size])
    blobs, position = [], TEMPLATES_FILE_HEADER.size
    for length in lengths:
        blobs.append(view[position : position + length])
        position += length
    _worker_state.update(
        templates=template_blob.CompactedTemplates(*blobs[:3]),
        redirects=template_blob.CompactedTemplates(*blobs[3:]),
        template_prefix=namespaces.get(TEMPLATE_NAMESPACE, "Template") + ":",
        known_namespaces={name for name in namespaces.values() if name},
        ignored_tags=[*wikiextractor._DEFAULT_IGNORED_TAG_PATTERNS, wikiextractor.ignoreTag("a")],
    )


# ---- tasks (module-level functions of plain values) --------------------------------------------


def _range_templates(dump: str, namespaces: dict[int, str], streams: list, end: int) -> tuple[int, int, list]:
    """First pass, one byte range of a multistream dump: (pages, bytes of XML, template definitions)."""
    reader = StreamRangeReader(dump, namespaces, streams, end)
    pages, definitions = 0, []
    for page in reader.pages():
        pages += 1
        if definition := _template_definition(page):
            definitions.append(definition)
    return pages, reader.xml_bytes, definitions


def _range_articles(
    dump: str, namespaces: dict[int, str], streams: list, end: int, folder: str, name: str, corpus: str
) -> tuple[int, Counter, list[tuple[str, str]]]:
    """Second pass, one byte range of a multistream dump, into the part `name` of `folder`: as
    _write_articles."""
    skipped = Counter()

    def articles() -> Iterator[tuple[str, str, str, str]]:
        for page in StreamRangeReader(dump, namespaces, streams, end).pages():
            if reason := skip_reason(page):
                skipped[reason] += 1
            else:
                yield page.page_id, page.revision_id, page.title, page.text

    return _write_articles(articles(), folder, name, corpus, skipped)


def _extract_articles(
    articles: list[tuple[str, str, str, str]], folder: str, name: str, corpus: str
) -> tuple[int, Counter, list[tuple[str, str]]]:
    """Second pass of a single-stream dump: the articles the main process read, as _write_articles."""
    return _write_articles(articles, folder, name, corpus, Counter())


def _write_articles(
    articles: Iterable[tuple[str, str, str, str]], folder: str, name: str, corpus: str, skipped: Counter
) -> tuple[int, Counter, list[tuple[str, str]]]:
    """Clean (page id, revision id, title, wikitext) articles into the part `name` of the document
    table `folder` (no documents: no file). Returns (documents written, `skipped` by reason, the
    (page id, title) of the pages skipped for their templates' budget): no text goes back."""
    over_budget = []
    with DocumentWriter(Path(folder), name=name) as writer:
        for article in articles:
            page_id, title, text = _extract_article(*article)
            if text is None:
                skipped["template_budget"] += 1
                over_budget.append((page_id, title))
            elif text:
                writer.add(corpus, f"{corpus}:{page_id}", title, text)
            else:
                skipped["empty"] += 1
    return writer.documents, skipped, over_budget


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


# ---- the two passes, per form of dump ----------------------------------------------------------


def _range_tasks(dump: Path, index: Path, namespaces: dict[int, str]) -> Iterator[tuple]:
    for streams, end in stream_ranges(dump, index, TASK_BYTES):
        yield str(dump), namespaces, streams, end


def _describe_range(task: tuple) -> str:
    dump, _, streams = task[:3]
    offset, page_ids = streams[0]
    return f"pages from id {page_ids[0]} (byte offset {offset}) of {dump}"


def _multistream_templates(
    dump: Path, index: Path, compute: Compute | int, templates_file: Path
) -> tuple[PageParser, int]:
    """First pass over a multistream dump, on the workers: (its header, its number of pages)."""
    header = read_header(dump, next(index_streams(dump, index))[0])
    pages = 0

    def definitions() -> Iterator[tuple[str, str, str]]:
        nonlocal pages
        tasks = _range_tasks(dump, index, header.namespaces)
        with (
            ComputePool(compute) as workers,
            tqdm(desc=f"templates {dump.name}", unit=" pages", leave=False) as progress,
        ):
            for range_pages, xml_bytes, range_definitions in workers.map(
                _range_templates, tasks, _describe_range
            ):
                pages += range_pages
                header.xml_bytes += xml_bytes
                progress.update(range_pages)
                yield from range_definitions

    _write_templates_file(templates_file, definitions())
    return header, pages


def _multistream_articles(
    dump: Path,
    index: Path,
    namespaces: dict[int, str],
    compute: Compute | int,
    templates_file: Path,
    folder: Path,
    part: str,
    corpus: str,
) -> Iterator[tuple[int, Counter, list]]:
    """Second pass over a multistream dump: each range's task writes the part `<part>-<range>` of
    the table `folder`; their results (_write_articles), in range order."""
    tasks = (
        (*task, str(folder), f"{part}-{number:06d}", corpus)
        for number, task in enumerate(_range_tasks(dump, index, namespaces))
    )
    with ComputePool(compute, _load_templates_file, (str(templates_file), namespaces)) as workers:
        yield from workers.map(_range_articles, tasks, _describe_range)


def _single_stream_templates(
    dump: Path, compute: Compute | int, templates_file: Path
) -> tuple[PageParser, int]:
    """First pass over a single-stream dump, in this process: (its reader, its number of pages)."""
    reader = DumpReader(dump, decompression_threads=Compute.of(compute).workers)
    pages = 0

    def definitions() -> Iterator[tuple[str, str, str]]:
        nonlocal pages
        for page in tqdm(reader.pages(), desc=f"templates {dump.name}", unit=" pages", leave=False):
            pages += 1
            if definition := _template_definition(page):
                yield definition

    _write_templates_file(templates_file, definitions())
    return reader, pages


def _single_stream_articles(
    dump: Path,
    namespaces: dict[int, str],
    compute: Compute | int,
    templates_file: Path,
    folder: Path,
    part: str,
    corpus: str,
    skipped: Counter,
) -> Iterator[tuple[int, Counter, list]]:
    """Second pass over a single-stream dump: this process reads it (pages not articles are counted
    into `skipped` here) and each task of TASK_CHARACTERS of articles writes the part
    `<part>-<task>` of the table `folder`; their results (_write_articles), in task order."""

    def articles() -> Iterator[tuple[str, str, str, str]]:
        for page in DumpReader(dump, decompression_threads=Compute.of(compute).workers).pages():
            if reason := skip_reason(page):
                skipped[reason] += 1
            else:
                yield page.page_id, page.revision_id, page.title, page.text

    tasks = (
        (batch, str(folder), f"{part}-{number:06d}", corpus)
        for number, batch in enumerate(_batches(articles(), TASK_CHARACTERS))
    )
    with ComputePool(compute, _load_templates_file, (str(templates_file), namespaces)) as workers:
        yield from workers.map(
            _extract_articles, tasks, describe=lambda task: f"pages from id {task[0][0][0]} of {dump}"
        )


def _batches(articles: Iterable[tuple[str, str, str, str]], characters: int) -> Iterator[list]:
    """Consecutive articles, a batch ending once its wikitext reaches `characters`."""
    batch, size = [], 0
    for article in articles:
        batch.append(article)
        size += len(article[3])
        if size >= characters:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def extract_dump(
    path: Path,
    folder: Path,
    compute: Compute | int,
    stats: ExtractStats,
    corpus: str,
    scratch: Path,
) -> None:
    """Extract the articles of one dump into the document table `folder`, as parts named
    `part-<dump number>-...` so that they follow the earlier dumps' (`scratch`: a folder for the
    templates file)."""
    index = index_of(path)
    templates_file = scratch / f"templates-{stats.files:05d}.bin"
    if index:
        header, total_pages = _multistream_templates(path, index, compute, templates_file)
    else:
        if path.name.endswith(".bz2"):
            log.info("%s: no multistream index beside it: reading it in one stream", path.name)
        header, total_pages = _single_stream_templates(path, compute, templates_file)
    if total_pages == 0:
        raise UserError(f"{path}: the dump contains no <page> elements; is it a MediaWiki XML export?")
    if not header.has_siteinfo:
        log.info("%s has no <siteinfo>: using the standard MediaWiki namespaces", path.name)
    found = 0
    skipped = Counter()
    part = f"part-{stats.files:03d}"
    if index:
        tasks = _multistream_articles(
            path, index, header.namespaces, compute, templates_file, folder, part, corpus
        )
    else:
        tasks = _single_stream_articles(
            path, header.namespaces, compute, templates_file, folder, part, corpus, skipped
        )
    try:
        with tqdm(desc=f"extract {path.name}", unit=" articles", leave=False) as progress:
            for documents, task_skipped, over_budget in tasks:
                progress.update(documents)
                found += documents
                skipped.update(task_skipped)
                for page_id, title in over_budget:
                    log.warning(
                        "%s: page %s (%r) skipped: its templates expand past %d expansions or %d characters",
                        path.name, page_id, title, TEMPLATE_EXPANSIONS_PER_PAGE, EXPANDED_CHARACTERS_PER_PAGE,
                    )  # fmt: skip
    finally:
        _worker_state.clear()  # when this process was the one worker

    stats.files += 1
    stats.pages += total_pages
    stats.documents += found
    stats.xml_bytes += header.xml_bytes
    stats.input_bytes += path.stat().st_size
    stats.skipped.update(skipped)
    if found == 0:
        summary = ", ".join(f"{count} {reason}" for reason, count in sorted(skipped.items())) or "nothing"
        raise UserError(
            f"{path}: {total_pages} pages but no article text was extracted (skipped: {summary}); "
            "is this a pages-articles dump?"
        )
    log.info("%s: %d pages -> %d documents (skipped: %s)", path.name, total_pages, found, dict(skipped))


def extract_wikipedia(
    input_path: str | Path, out_dir: str | Path, corpus: str, compute: Compute | int
) -> ExtractStats:
    """Extract every dump under `input_path` into the document table `out_dir` (atomically), with
    ids `<corpus>:<page id>`. (Each kind of corpus has an extractor of this signature: `format_books`.)"""
    dumps = find_dumps(input_path)
    compute = Compute.of(compute)
    stats = ExtractStats()
    start = time.perf_counter()
    out_dir = Path(out_dir)
    # The scratch folder (templates files) lies beside the output, named like atomic_folder's
    # temporaries, so the next run sweeps away the one of a killed run.
    with (
        atomic_folder(out_dir) as tmp_dir,
        tempfile.TemporaryDirectory(
            prefix=f".{out_dir.name}.tmp-{os.getpid()}-", dir=out_dir.parent
        ) as scratch,
    ):
        for dump in dumps:
            extract_dump(dump, tmp_dir, compute, stats, corpus, Path(scratch))
    stats.seconds = time.perf_counter() - start
    metrics = stats.metrics()
    log.info(
        "%d pages -> %d documents in %.1fs: %.0f pages/s, %.2f MB/s of XML",
        stats.pages, stats.documents, stats.seconds, metrics["pages_per_second"], metrics["megabytes_per_second"],
    )  # fmt: skip
    return stats
