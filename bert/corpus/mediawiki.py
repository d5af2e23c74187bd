"""MediaWiki XML exports (Wikipedia dumps) -> pages, read with a real XML parser.

A dump comes in one of two forms:
  - one XML document, `.xml` or `.xml.bz2`: read from start to end (DumpReader);
  - a Wikimedia multistream dump, `<name>-multistream.xml.bz2` with its index
    `<name>-multistream-index.txt.bz2`. The dump is a concatenation of independent bz2 streams:
    the first holds the `<mediawiki>` start tag and `<siteinfo>`, each of the others ~100 `<page>`
    elements, and the last is followed by `</mediawiki>`. The index has a line
    `offset:page_id:title` for every page, `offset` being the byte where the page's stream starts.
    So any run of whole streams can be decompressed and parsed on its own: `stream_ranges` cuts
    the dump into byte ranges from its index, and a worker reads one range (StreamRangeReader),
    opening and seeking the file itself, without anything but the range's offsets and page ids.

Wherever a dump is wrong (truncated, corrupt, or an index that does not belong to the file), the
error is a UserError naming the file and the byte offset or line.
"""

import bz2
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bert.errors import UserError

try:  # decompresses one bz2 stream on several threads; optional (without it: the bz2 module)
    import indexed_bzip2
except ImportError:
    indexed_bzip2 = None

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

MULTISTREAM_SUFFIX = "-multistream.xml.bz2"
INDEX_SUFFIX = "-multistream-index.txt.bz2"
# Every bz2 stream starts with "BZh", the block size ('1'-'9'), then the first block's magic number
# (pi's digits); a stream with no data at all would have the end-of-stream magic there instead.
BZ2_STREAM_START = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")


@dataclass
class Page:
    page_id: str
    revision_id: str
    title: str
    namespace: int
    redirect: bool
    text: str


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


class PageParser:
    """Turns <page> elements of the dump at `path` into Pages, with the wiki's namespaces."""

    def __init__(self, path: str | Path, namespaces: dict[int, str] | None = None):
        self.path = Path(path)
        self.namespaces: dict[int, str] = dict(namespaces or STANDARD_NAMESPACES)
        self.has_siteinfo = False
        self.xml_bytes = 0

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


class DumpReader(PageParser):
    """Streams the pages of one MediaWiki XML document (.xml, .xml.bz2) from start to end; learns
    the namespaces from <siteinfo>. A .bz2 file is decompressed on `decompression_threads`
    threads when indexed_bzip2 is installed."""

    def __init__(self, path: str | Path, decompression_threads: int = 1):
        super().__init__(path)
        self.decompression_threads = decompression_threads

    def _open(self):
        if not self.path.name.endswith(".bz2"):
            return open(self.path, "rb")
        if indexed_bzip2 is not None and self.decompression_threads > 1:
            with open(self.path, "rb") as file:
                is_bz2 = BZ2_STREAM_START.match(file.read(10))
            # indexed_bzip2 reads a file that is not bz2 as empty: such a file goes to bz2, which says so.
            if is_bz2:
                return indexed_bzip2.IndexedBzip2File(
                    str(self.path), parallelization=self.decompression_threads
                )
        return bz2.open(self.path, "rb")

    def pages(self) -> Iterator[Page]:
        count = 0
        try:
            with self._open() as raw:
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
        except RuntimeError as error:  # indexed_bzip2's only error: a truncated or corrupt stream
            raise UserError(
                f"{self.path}: the bz2 stream is truncated or corrupt ({error}); "
                "the download is incomplete or damaged: download it again"
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


# ---- multistream dumps ---------------------------------------------------------------------------


def index_of(dump: Path) -> Path | None:
    """The index beside a multistream dump, if there is one."""
    if not dump.name.endswith(MULTISTREAM_SUFFIX):
        return None
    index = dump.with_name(dump.name.removesuffix(MULTISTREAM_SUFFIX) + INDEX_SUFFIX)
    return index if index.is_file() else None


def dump_of(index: Path) -> Path:
    """The dump a multistream index belongs to (it may be missing)."""
    return index.with_name(index.name.removesuffix(INDEX_SUFFIX) + MULTISTREAM_SUFFIX)


# A stream, as the index describes it: (byte offset, ids of its pages in order).
Stream = tuple[int, list[str]]


def index_streams(dump: Path, index: Path) -> Iterator[Stream]:
    """The streams of `dump` listed in `index`, in file order, read lazily (an index of all of
    enwiki has 20+ million lines). Offsets must grow and lie inside the dump."""
    size = dump.stat().st_size
    line_number = 0
    try:
        with bz2.open(index, "rb") as lines:
            offset, ids = -1, []
            for line_number, line in enumerate(lines, 1):
                fields = line.split(b":", 2)
                try:
                    line_offset, page_id = int(fields[0]), fields[1].decode("ascii")
                    if len(fields) != 3 or not page_id.isdigit():
                        raise ValueError
                except (ValueError, IndexError, UnicodeDecodeError):
                    raise UserError(
                        f"{index}: line {line_number} is not `offset:page_id:title` "
                        f"({line[:60]!r}); is this a multistream index? Download it again"
                    ) from None
                if line_offset == offset:
                    ids.append(page_id)
                    continue
                if line_offset >= size:
                    raise UserError(
                        f"{dump}: its index {index} lists a stream at byte offset {line_offset} (line "
                        f"{line_number}), past the end of the file ({size} bytes): the dump is truncated, "
                        "or the index is not the one of this dump: download both again"
                    )
                if line_offset < offset:
                    raise UserError(
                        f"{index}: line {line_number}: byte offset {line_offset} comes before the previous "
                        f"stream's {offset}: the index is corrupt: download it again"
                    )
                if ids:
                    yield offset, ids
                offset, ids = line_offset, [page_id]
            if ids:
                yield offset, ids
    except EOFError:
        raise UserError(
            f"{index}: the bz2 stream ends early (truncated after line {line_number}); download it again"
        ) from None
    except OSError as error:
        raise UserError(
            f"{index}: cannot read ({error}) after line {line_number}; download it again"
        ) from None
    if line_number == 0:
        raise UserError(f"{index}: the index lists no pages; download it again")


def stream_ranges(dump: Path, index: Path, range_bytes: int) -> Iterator[tuple[list[Stream], int]]:
    """`dump` cut into runs of whole streams of about `range_bytes` compressed bytes each (at least
    one stream): (the streams, the byte where the range ends). The first range starts at the first
    page stream (after the <siteinfo> header), the last one ends at the end of the file."""
    size = dump.stat().st_size
    streams: list[Stream] = []
    for stream in index_streams(dump, index):
        if streams and stream[0] - streams[0][0] >= range_bytes:
            yield streams, stream[0]
            streams = []
        streams.append(stream)
    yield streams, size


def _decompress(data: memoryview, offset: int, dump: Path, size: int) -> bytes:
    """The XML of the bz2 streams in `data`, the bytes of `dump` from `offset` to where its index
    says the next stream starts (or the end of the file, `size` bytes). `data` may hold more than
    one stream: the dump's last page stream is followed by the stream of </mediawiki>."""
    parts = []
    position, previous = 0, offset  # previous: where the stream before `position` started
    while position < len(data):
        start, end = offset + position, offset + len(data)
        if not BZ2_STREAM_START.match(data[position : position + 10]):
            if position == 0:
                raise UserError(
                    f"{dump}: byte offset {start} does not start a bz2 stream, where its index says one "
                    "starts: the index is stale (made for another version of the dump): download both again"
                )
            if end == size:
                raise UserError(
                    f"{dump}: the bytes from offset {start} to the end of the file are not a bz2 stream: "
                    "the file is corrupt: download it again"
                )
            raise UserError(
                f"{dump}: the bz2 stream at byte offset {previous} ends at byte {start}, not at byte {end} "
                "where its index says the next stream starts: the index is stale (made for another "
                "version of the dump): download both again"
            )
        decompressor = bz2.BZ2Decompressor()
        try:
            parts.append(decompressor.decompress(data[position:]))
        except OSError as error:
            raise UserError(
                f"{dump}: the bz2 stream at byte offset {start} is corrupt ({error}): download it again"
            ) from None
        if not decompressor.eof:
            if end == size:
                raise UserError(
                    f"{dump}: the bz2 stream at byte offset {start} is truncated (the file ends at byte "
                    f"{size}): the download is incomplete: download it again"
                )
            raise UserError(
                f"{dump}: the bz2 stream at byte offset {start} goes on past byte {end}, where its index "
                "says the next stream starts: the index is stale (made for another version of the dump): "
                "download both again"
            )
        previous, position = start, len(data) - len(decompressor.unused_data)
    return b"".join(parts)


def read_header(dump: Path, end: int) -> PageParser:
    """The namespaces from the <siteinfo> in the streams before byte `end` (the first page stream)."""
    header = PageParser(dump)
    if end == 0:
        raise UserError(
            f"{dump}: its index puts pages at byte offset 0, where a multistream dump has its <siteinfo> "
            "header: the index does not belong to this dump: download both again"
        )
    with open(dump, "rb") as file:
        data = memoryview(file.read(end))
    xml = _decompress(data, 0, dump, dump.stat().st_size)
    header.xml_bytes = len(xml)
    parser = ET.XMLPullParser(events=("end",))
    try:
        parser.feed(xml)
        for _, element in parser.read_events():
            if _local(element.tag) == "siteinfo":
                header._read_siteinfo(element)
            elif _local(element.tag) == "page":
                raise UserError(
                    f"{dump}: the header streams before byte offset {end} hold a <page> its index does "
                    "not list: the index is stale (made for another version of the dump): download both again"
                )
    except ET.ParseError as error:
        raise UserError(
            f"{dump}: malformed XML in the header stream at byte offset 0 ({str(error).split(':')[0]}): "
            "the file is corrupt, or not a MediaWiki export: download it again"
        ) from None
    return header


class StreamRangeReader(PageParser):
    """The pages of a run of whole streams of a multistream dump, [streams[0] offset, end): checks
    that each stream holds the pages the index lists for it. Built from plain values (a worker
    opens the file itself), with the namespaces of the dump's header (read_header)."""

    def __init__(self, dump: str, namespaces: dict[int, str], streams: list[Stream], end: int):
        super().__init__(dump, namespaces)
        self.streams = streams
        self.end = end

    def pages(self) -> Iterator[Page]:
        start = self.streams[0][0]
        size = os.path.getsize(self.path)
        with open(self.path, "rb") as file:
            file.seek(start)
            data = memoryview(file.read(self.end - start))
        # The streams hold <page> elements without their <mediawiki> root: parse them inside one;
        # the dump's own </mediawiki> closes it after the last stream, ours after any other.
        parser = ET.XMLPullParser(events=("start", "end"))
        parser.feed(b"<mediawiki>")
        root = None
        for number, (offset, ids) in enumerate(self.streams):
            stream_end = self.streams[number + 1][0] if number + 1 < len(self.streams) else self.end
            xml = _decompress(data[offset - start : stream_end - start], offset, self.path, size)
            self.xml_bytes += len(xml)
            found = []
            try:
                parser.feed(xml)
                if stream_end == self.end:
                    if self.end < size:
                        parser.feed(b"</mediawiki>")
                    parser.close()  # after the last stream, the dump's own </mediawiki> closed it
                for event, element in parser.read_events():
                    if root is None:
                        root = element
                    elif event == "end" and _local(element.tag) == "page":
                        page = self._page(element)
                        found.append(page.page_id)
                        yield page
                        root.clear()
            except ET.ParseError as error:
                reason = str(error).split(":")[0]
                if stream_end == size and reason == "no element found":
                    reason = "the file ends without </mediawiki>"
                raise UserError(
                    f"{self.path}: malformed XML in the bz2 stream at byte offset {offset} ({reason}): "
                    "the file is corrupt, truncated or not UTF-8: download it again"
                ) from None
            if found != ids:
                raise UserError(
                    f"{self.path}: the bz2 stream at byte offset {offset} {_mismatch(found, ids)}"
                )


def _mismatch(found: list[str], listed: list[str]) -> str:
    for position, (got, expected) in enumerate(zip(found, listed)):
        if got != expected:
            what = f"holds page id {got} as page {position + 1}, where its index lists page id {expected}"
            break
    else:
        what = f"holds {len(found)} pages, where its index lists {len(listed)}"
    return f"{what}: the index is stale (made for another version of the dump): download both again"
