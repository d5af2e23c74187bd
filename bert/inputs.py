"""The input boundary: the checked readers for files a user supplies.

Every text, JSON or delimited file that comes from outside (params aside: stages/common/params.py) is
decoded and parsed here, so that whatever is wrong with it — bytes that are not UTF-8, JSON cut
short, an HTML error page saved under the file's name, a CSV field with a runaway quote — is one
`UserError` naming the file (as the caller says the user wrote it: `source`) and the line, and
never a traceback. `check_content` tells by the first bytes whether a downloaded file is what its
name says it is.
"""

import csv
import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import yaml

from bert.errors import UserError

SNIFF_BYTES = 512
# What a file must begin with, by the end of its name.
MAGIC = {
    ".zip": ((b"PK\x03\x04", b"PK\x05\x06"), "zip archive"),
    ".bz2": ((b"BZh",), "bzip2 file"),
    ".gz": ((b"\x1f\x8b",), "gzip file"),
    ".parquet": ((b"PAR1",), "Parquet file"),
}


def shown(value, limit: int = 60) -> str:
    """A value from a user's file for a message: repr'd, and cut if long (a runaway field)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}...{text[-12:]} ({len(text):,} characters)"


def decode_text(data: bytes, source: str | Path) -> str:
    """UTF-8 bytes as text (a leading byte-order mark dropped: MRPC's files begin with one), or one
    line naming the first byte that is not UTF-8 by line and column."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        start = error.start
        line = data.count(b"\n", 0, start) + 1
        column = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise UserError(
            f"{source}: not UTF-8 text: byte 0x{data[start]:02x} at line {line}, column {column}; "
            "save the file as UTF-8"
        ) from None


def read_bytes(path: str | Path, source: str | Path | None = None) -> bytes:
    """The bytes of a file the user named; a missing file or folder is one line."""
    path = Path(path)
    source = source or path
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{source}: not found; check the path") from None
    except IsADirectoryError:
        raise UserError(f"{source}: a folder, not a file") from None
    except PermissionError:
        raise UserError(f"{source}: not readable (permission denied); check its permissions") from None


def read_text(path: str | Path, source: str | Path | None = None) -> str:
    """A UTF-8 text file (see decode_text) that is not an HTML page."""
    data = read_bytes(path, source)
    _reject_html(data, source or path, "text")
    return decode_text(data, source or path)


def read_json(path: str | Path, source: str | Path | None = None):
    """A JSON file: UTF-8, parsed, with the line and column of the first syntax error."""
    data = read_bytes(path, source)
    return parse_json(data, source or path)


def parse_json(data: bytes, source: str | Path):
    _reject_html(data, source, "JSON")
    text = decode_text(data, source)
    if not text.strip():
        raise UserError(f"{source}: empty, not JSON; download or write the file again")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        ends = error.pos >= len(text.rstrip()) or error.msg.startswith("Unterminated string")
        cut = " (the file ends there: cut short?)" if ends else ""
        raise UserError(
            f"{source}: not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}{cut}"
        ) from None
    except RecursionError:
        raise UserError(f"{source}: JSON nested too deeply to be a real file") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error: YAML itself
    keeps the last, so a forgotten first copy would silently be ignored."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: the base class raises its own error
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} is given twice (lines {seen[key] + 1} and {key_node.start_mark.line + 1}); "
                    "YAML would keep only the last — remove one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node, deep=False):
        # A tagged scalar its constructor cannot read (`!!int x`, `!!timestamp 2001-13-45`, `!!bool x`)
        # raises whatever that constructor raises, not a YAMLError: make it one, with its place.
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            tag = str(node.tag).rpartition(":")[2]
            raise yaml.constructor.ConstructorError(
                None, None, f"{shown(node.value)} is not a valid !!{tag}", node.start_mark
            ) from None


def read_yaml(path: str | Path, source: str | Path | None = None):
    """A YAML file: UTF-8, parsed with the safe loader, no key given twice in a mapping; an error is
    one line with the line and column."""
    source = source or path
    return parse_yaml(decode_text(read_bytes(path, source), source), source)


def parse_yaml(text: str, source: str | Path):
    """YAML text (from `source`), parsed as read_yaml parses a file; an error is one line."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)  # PyYAML's own message spans several lines
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or " ".join(str(error).split())
        raise UserError(f"{source}: not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise UserError(f"{source}: YAML nested too deeply to be a real file") from None


def read_rows(path: str | Path, delimiter: str, source: str | Path | None = None) -> list[list[str]]:
    """The rows of a delimited file: "," is CSV with quotes (SWAG), "\\t" is an unquoted TSV (GLUE,
    whose questions hold quote characters as text)."""
    text = read_text(path, source)
    source = source or path
    if delimiter != ",":
        # Lines end at \n, \r\n or \r only (str.splitlines would also split at \x85, \u2028, ...).
        return [line.rstrip("\r\n").split(delimiter) for line in io.StringIO(text, newline="")]
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        return list(reader)
    except csv.Error as error:
        raise UserError(
            f"{source}: line {reader.line_num}: {error}; an unbalanced double quote makes the rest of "
            "the file one field — check the quotes on or before that line"
        ) from None


def check_content(path: str | Path, source: str | Path | None = None) -> None:
    """A downloaded file is what the end of its name says (zip, bzip2, gzip, Parquet, JSON,
    safetensors, PyTorch weights) and, whatever its name, not an HTML page — what a web server
    answers, with status 200, for a page that moved or needs a sign-in."""
    path = Path(path)
    source = source or path
    suffix = path.suffix.lower()
    with open(path, "rb") as file:
        head = file.read(SNIFF_BYTES)
    if suffix in (".html", ".htm"):
        return
    kind = MAGIC.get(suffix, (None, "JSON" if suffix == ".json" else "file"))[1]
    if suffix == ".safetensors":
        kind = "safetensors file"
    _reject_html(head, source, kind)
    if suffix in MAGIC:
        magics, kind = MAGIC[suffix]
        if not head.startswith(magics):
            raise UserError(f"{source}: not a {kind} (it begins with {head[:8]!r}); {_redownload(source)}")
    elif suffix == ".json":
        if not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"[")):
            raise UserError(f"{source}: not JSON (it begins with {head[:8]!r}); {_redownload(source)}")
    elif suffix == ".safetensors":
        _check_safetensors_header(path, head, source)


def _check_safetensors_header(path: Path, head: bytes, source) -> None:
    """safetensors: an 8-byte little-endian header length, then that many bytes of JSON."""
    size = path.stat().st_size
    length = struct.unpack("<Q", head[:8])[0] if len(head) >= 8 else None
    if length is None or length > size - 8 or not head[8:9] == b"{":
        raise UserError(
            f"{source}: not a safetensors file (truncated or another format); {_redownload(source)}"
        )


def _reject_html(head: bytes, source, kind: str) -> None:
    start = head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or (
        start.startswith(b"<") and b"<html" in start
    ):
        raise UserError(
            f"{source}: an HTML page, not the {kind} expected (a web server's error or sign-in page "
            f"saved under the file's name); {_redownload(source)}"
        )


def _redownload(source) -> str:
    if "://" in str(source) and not str(source).startswith("file://"):
        return "check the URL (open it in a browser), or download the file by hand and give its path"
    return "replace the file with the real one"


def read_zip_members(
    archive: str | Path, wanted, source: str | Path | None = None
) -> list[tuple[str, bytes]]:
    """(member name, bytes) of the files in a zip archive whose name `wanted(name)` accepts, each
    checked (CRC, compression, no encryption); a damaged archive or member is one line naming
    `<source>:<member>`."""
    source = source or archive
    members = []
    try:
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                if info.is_dir() or not wanted(info.filename):
                    continue
                where = f"{source}:{info.filename}"
                if info.flag_bits & 0x1:
                    raise UserError(
                        f"{where}: encrypted (password-protected); unpack it yourself and point at the folder"
                    )
                try:
                    members.append((info.filename, zipped.read(info)))
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
                    raise UserError(f"{where}: damaged ({error}); download the archive again") from None
                except NotImplementedError as error:
                    raise UserError(f"{where}: {error}; unpack it yourself and point at the folder") from None
    except zipfile.BadZipFile as error:
        raise UserError(f"{source}: not a valid zip archive ({error}); download it again") from None
    return members
