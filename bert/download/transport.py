"""Bytes from a source to a `.part` file: HTTP(S) with retries, resume and a minimum rate, or a
local copy; and what a source is (a URL, a file:// URL or a local path) and its file name.

- an interrupted HTTP download (connection cut, timeout, 5xx, 429, a body shorter than its
  Content-Length) is retried with exponential back-off, each retry resuming the `.part` with a
  `Range: bytes=N-` request; when the retries run out the `.part` is KEPT, so a re-run resumes;
- a server that answers a Range request with the whole file (200) cannot resume: we start over
  from byte 0 once, and if that transfer is cut too we stop with an error (the `.part` is removed,
  being of no use to a server that cannot resume);
- a 404/410 (`SourceNotFound`), 401/403 or other 4xx is not retried;
- a server that sends less than MIN_BYTES_PER_WINDOW in RATE_WINDOW_SECONDS (or nothing for
  `timeout` seconds) is cut off and retried like a cut connection; without a terminal a progress
  line is logged every LOG_EVERY_SECONDS, however slowly the bytes come.

`.part.json` beside the `.part` remembers which URL it came from and the server's ETag /
Last-Modified, so a `.part` is never resumed from a different URL, a file that changed on the
server since (If-Range) is fetched again from the start rather than spliced, and a `.part` from a
server that gives neither is never resumed (nothing proves it is the same file).
Only the standard library (and tqdm for the bar) is used.
"""

import hashlib
import http.client
import json
import logging
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from tqdm import tqdm

from bert.errors import UserError
from bert.source_tree import Rules, SourceNotFound, open_regular, walk_source

log = logging.getLogger(__name__)
T = TypeVar("T")

CHUNK_SIZE = 1 << 20
USER_AGENT = "bert-dvc/0.1 (BERT pretraining pipeline; Python urllib)"
RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}
NOT_FOUND_STATUSES = {404, 410}
MAX_RETRY_AFTER = 300.0
LOG_EVERY_SECONDS = 30.0
RETRIES, BACKOFF_SECONDS, TIMEOUT_SECONDS = 5, 1.0, 60.0  # a failed attempt is retried after 1, 2, 4... s
# A stalled server (bytes trickling in) would keep an attempt alive for ever: less than this many
# bytes in a window of this many seconds cuts the attempt (1 KiB/s averaged over a minute).
MIN_BYTES_PER_WINDOW = 64 * 1024
RATE_WINDOW_SECONDS = 60.0


class Transient(Exception):
    """A failure worth retrying: a cut connection, a timeout, a 5xx or 429."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def file_name(source: str) -> str:
    """The file name a source will be saved under: the last part of the URL path, or the path's name."""
    if is_url(source) or source.startswith("file://"):
        name = PurePosixPath(urllib.parse.unquote(urllib.parse.urlparse(source).path)).name
    else:
        name = Path(source).name
    if not name:
        raise UserError(f"{source}: no file name in the URL path; point at a file, not a folder")
    return name


# --- sources -------------------------------------------------------------------------------------


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def local_path(source: str) -> Path | None:
    """The path of a local source (a path or a file:// URL); None for an http(s) URL."""
    if is_url(source):
        return None
    if source.startswith("file://"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(source).path))
    if "://" in source:
        raise UserError(f"{source}: unsupported URL scheme; use https://, http://, file:// or a local path")
    return Path(source)


def expand(source: str, checksum: str | None, rules: Rules) -> Iterable[tuple[str, str]]:
    """(source, file name) pairs: one for a file or URL, one per file for a local folder (its
    top-level files, hidden ones aside). A local source is walked first (bert.source_tree)."""
    if is_url(source):
        return [(source, file_name(source))]
    tree = walk_source(source, local_path(source), rules)
    if not tree.is_folder:
        return [(source, file_name(source))]
    if checksum:
        raise UserError(f"{source}: a checksum applies to one file, not a folder; list the files instead")
    files, left_out = tree.top_level()
    if left_out:
        log.warning(
            "%s: not copied, as a folder source stands for its top-level files, hidden ones aside: %s",
            source,
            ", ".join(left_out),
        )
    if not files:
        raise UserError(f"{source}: the folder has no files")
    return [(str(path), path.name) for path in files]


# --- versions ---------------------------------------------------------------------------------------


def local_version(path: Path) -> list[int] | None:
    """Size and modification times (ctime too: `cp -p` or `touch -r` can put back an old mtime)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def unchanged_on_server(url: str, record: dict, *, retries: int, backoff: float, timeout: float) -> bool:
    """Ask the server whether the file still has the ETag / Last-Modified it had (304 Not Modified)."""
    etag, modified = record.get("etag"), record.get("last_modified")
    if not etag and not modified:
        return False  # the server gave nothing that proves the file is the same
    headers = {"If-None-Match": etag} if etag else {"If-Modified-Since": modified}

    def ask() -> bool:
        with _open(url, headers, timeout) as response:
            if response.status == 304:
                return True
            # A server that ignores the condition answers 200: compare what it says itself.
            same = (response.headers.get("ETag"), response.headers.get("Last-Modified")) == (etag, modified)
            return same and _total_size(response, 0) == record["size"]

    return retrying(url, ask, retries=retries, backoff=backoff)


def hash_file(path: Path, algorithm: str, limit: int | None = None) -> "hashlib._Hash":
    hasher = hashlib.new(algorithm)
    remaining = path.stat().st_size if limit is None else limit
    with open(path, "rb") as file:
        while remaining > 0:
            chunk = file.read(min(CHUNK_SIZE, remaining))
            if not chunk:
                break
            hasher.update(chunk)
            remaining -= len(chunk)
    return hasher


# --- local copy ----------------------------------------------------------------------------------


def copy_local(path: Path, part: Path, algorithm: str | None) -> tuple[str | None, str]:
    """Copy `path` to `part`; the digest of the checksum's `algorithm` (None without one) and the
    SHA-256 of the bytes copied (a download checks it against its sources' manifest)."""
    hasher = hashlib.new(algorithm) if algorithm else None
    content = hashlib.sha256()
    # Local copies are fast and cannot be cut by a network, so they always start from byte 0.
    with (
        open_regular(path, str(path)) as source,  # never a FIFO's wait nor a device's endless bytes
        open(part, "wb") as out,
        _Progress(path.name, path.stat().st_size, 0) as bar,
    ):
        while chunk := source.read(CHUNK_SIZE):
            out.write(chunk)
            content.update(chunk)
            if hasher:
                hasher.update(chunk)
            bar.update(len(chunk))
    return (hasher.hexdigest() if hasher else None), content.hexdigest()


# --- HTTP ----------------------------------------------------------------------------------------


def download_http(
    url: str, part: Path, algorithm: str | None, *, retries: int, backoff: float, timeout: float
) -> tuple[str | None, dict]:
    """Fill `part` from `url`, resuming and retrying; returns the hex digest of the whole file and
    what the server said about it (`.part.json`: ETag, Last-Modified, size)."""
    state = _Attempts(meta=_resumable_meta(url, part))
    while True:
        try:
            return _attempt(url, part, algorithm, state, timeout), state.meta
        except _StartOver:
            continue
        except Transient as error:
            _after_failure(url, part, error, state, retries, backoff)


@dataclass
class _Attempts:
    """What the attempts of one download have learnt."""

    meta: dict  # the `.part`'s record (`.part.json`): source, etag, last_modified, total
    failures: int = 0
    server_ignores_range: bool = False  # it answered a Range request with the whole file


class _StartOver(Exception):
    """The `.part` does not fit the file on the server and is gone: the next attempt starts at byte
    0 at once, no failure counted."""


def _resumable_meta(url: str, part: Path) -> dict:
    """The record of a `.part` that may be resumed; a `.part` that may not is removed first."""
    meta = read_meta(meta_path(part))
    if part.exists() and meta.get("source") != url:
        log.info("%s: left over from another source; starting over", part)
        remove_part(part)
        meta = {}
    elif part.exists() and not (meta.get("etag") or meta.get("last_modified")):
        log.info(
            "%s: the server gave no ETag or Last-Modified to prove it is the same file; starting over", part
        )
        remove_part(part)
    return meta


def _attempt(url: str, part: Path, algorithm: str | None, state: _Attempts, timeout: float) -> str | None:
    """One request for the bytes the `.part` lacks (all of them when it is not there), appended to
    it; the digest of the whole file (None without an `algorithm`). Transient when cut."""
    offset = part.stat().st_size if part.exists() else 0
    validator = state.meta.get("etag") or state.meta.get("last_modified")
    headers = {}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    with _open(url, headers, timeout) as response:
        if response.status == 416:
            offset = _handle_unsatisfiable_range(response, part, offset)
            if offset == 0:
                raise _StartOver
            return _digest_so_far(part, algorithm, offset).hexdigest() if algorithm else None
        offset = _offset_served(url, part, response, offset, validator, state)
        total = _total_size(response, offset)
        state.meta = {
            "source": url,
            "etag": response.headers.get("ETag"),
            "last_modified": response.headers.get("Last-Modified"),
            "total": total,
        }
        meta_path(part).write_text(json.dumps(state.meta), encoding="utf-8")
        if offset:
            log.info("%s: resuming at %s of %s", part.name, human(offset), human(total))
        hasher = _digest_so_far(part, algorithm, offset) if algorithm else None
        _stream(response, part, offset, total, hasher)
    return hasher.hexdigest() if hasher else None


def _digest_so_far(part: Path, algorithm: str, offset: int) -> "hashlib._Hash":
    """A hasher fed the `.part`'s first `offset` bytes: on resume they are part of the digest too."""
    return hash_file(part, algorithm, offset) if offset else hashlib.new(algorithm)


def _offset_served(
    url: str, part: Path, response, offset: int, validator: str | None, state: _Attempts
) -> int:
    """Where the response's body starts in the file: `offset` when it resumes the `.part`, 0 when
    the server sent the whole file (it changed, or the server ignores Range requests)."""
    new_validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
    if offset and response.status == 200:
        if validator and new_validator and new_validator != validator:
            log.info("%s: the file changed on the server since the partial download; starting over", url)
        else:
            log.warning("%s: the server ignored the Range request (no resume); starting over", url)
            state.server_ignores_range = True
        return 0
    if response.status == 206:
        _check_content_range(response, part, offset)
        if new_validator and new_validator != validator:  # If-Range ignored
            remove_part(part)
            raise Transient("the file changed on the server since the partial download")
    return offset


def _after_failure(
    url: str, part: Path, error: Transient, state: _Attempts, retries: int, backoff: float
) -> None:
    """After a cut attempt: give up in one line (UserError) when no retry is left or the server
    cannot resume a transfer it cut again, else wait out the back-off."""
    if state.server_ignores_range:
        remove_part(part)
        raise UserError(
            f"{url}: the server does not support resuming downloads (it answered a Range request "
            f"with the whole file) and the transfer was cut again ({error}); try again later, or fetch "
            "the file another way and give its local path"
        ) from None
    state.failures += 1
    if not (state.meta.get("etag") or state.meta.get("last_modified")):
        remove_part(part)  # such a .part cannot be resumed (_resumable_meta)
    have = part.stat().st_size if part.exists() else 0
    if state.failures > retries:
        kept = f"; {human(have)} kept for the next run, run again to resume" if have else ""
        raise UserError(f"{url}: failed after {state.failures} attempts: {error}{kept}") from None
    delay = error.retry_after if error.retry_after is not None else backoff * 2 ** (state.failures - 1)
    log.warning("%s: %s; retry %d/%d in %.1f s", url, error, state.failures, retries, delay)
    time.sleep(delay)


def _open(url: str, headers: dict[str, str], timeout: float) -> http.client.HTTPResponse:
    """urlopen that sorts failures: Transient (retry), SourceNotFound, UserError (give up)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code in (304, 416):
            return error  # the caller reads its status and headers
        error.close()
        status = f"HTTP {error.code} {error.reason}"
        if error.code in RETRY_STATUSES or error.code >= 500:
            raise Transient(status, _retry_after(error.headers.get("Retry-After"))) from None
        if error.code in NOT_FOUND_STATUSES:
            raise SourceNotFound(f"{url}: {status}; the file is not there — check the URL") from None
        if error.code in (401, 403):
            raise UserError(
                f"{url}: {status}; access denied — check the URL, or download the file by hand and give its local path"
            ) from None
        raise UserError(f"{url}: {status}; check the URL") from None
    except urllib.error.URLError as error:
        raise Transient(f"cannot reach the server ({error.reason}); check the URL and the network") from None
    except (OSError, http.client.HTTPException) as error:
        raise Transient(f"connection failed ({error!r})") from None


def _stream(response, part: Path, offset: int, total: int | None, hasher) -> None:
    received = offset
    with (
        open(part, "r+b" if offset else "wb") as out,
        _Progress(part.name.removesuffix(".part"), total, offset) as bar,
    ):
        out.seek(offset)
        out.truncate()
        for chunk in _chunks(response, offset):
            out.write(chunk)
            if hasher:
                hasher.update(chunk)
            received += len(chunk)
            bar.update(len(chunk))
    if total is not None and received != total:
        raise Transient(f"connection closed after {received} of {total} bytes")


def _chunks(response, received: int) -> Iterator[bytes]:
    """The body as it arrives: read1 returns after one network read, so even a slow server yields
    chunks (and progress lines). A server that sends less than MIN_BYTES_PER_WINDOW in
    RATE_WINDOW_SECONDS is cut off (Transient); one that sends nothing times out in `timeout`."""
    window_start, window_bytes = time.monotonic(), 0
    while True:
        try:
            chunk = response.read1(CHUNK_SIZE)
        except (OSError, http.client.HTTPException) as error:
            raise Transient(f"connection cut after {human(received)} ({error!r})") from None
        if not chunk:
            return
        received += len(chunk)
        window_bytes += len(chunk)
        yield chunk
        elapsed = time.monotonic() - window_start
        if elapsed >= RATE_WINDOW_SECONDS:
            if window_bytes < MIN_BYTES_PER_WINDOW:
                raise Transient(
                    f"too slow: {human(window_bytes)} in the last {elapsed:.1f} s "
                    f"({human(window_bytes / elapsed)}/s, under the minimum of {human(MIN_BYTES_PER_WINDOW)} "
                    f"per {RATE_WINDOW_SECONDS:g} s); try again later or from another mirror, or download "
                    "the file by hand and give its local path"
                )
            window_start, window_bytes = time.monotonic(), 0


def _total_size(response, offset: int) -> int | None:
    if response.status == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        if _is_number(total):
            return int(total)
    length = response.headers.get("Content-Length")
    if length is None or not _is_number(length):
        return None
    return int(length) + (offset if response.status == 206 else 0)


def _is_number(text: str) -> bool:
    # ASCII digits: headers are Latin-1, and "²" passes isdigit() but not int().
    return text.isascii() and text.isdigit()


def _check_content_range(response, part: Path, offset: int) -> None:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    if not match or int(match[1]) != offset:
        remove_part(part)  # the next attempt starts from byte 0 rather than splice at a wrong offset
        raise Transient(
            f"asked for bytes from {offset}, got Content-Range {response.headers.get('Content-Range')!r}"
        )


def _handle_unsatisfiable_range(response, part: Path, offset: int) -> int:
    """416 to 'bytes=N-': if N is the file size the .part is complete; else start over (returns 0)."""
    total = response.headers.get("Content-Range", "").rpartition("/")[2]
    if _is_number(total) and int(total) == offset:
        return offset
    log.info("%s: the partial file does not fit the file on the server; starting over", part)
    remove_part(part)
    return 0


def fetch_text(url: str, *, retries: int, backoff: float, timeout: float) -> str:
    """A small text file (a sums listing), with the same retries and minimum rate as a download."""

    def fetch() -> str:
        with _open(url, {}, timeout) as response:
            return b"".join(_chunks(response, 0)).decode("utf-8", errors="replace")

    return retrying(url, fetch, retries=retries, backoff=backoff)


def retrying(url: str, request: Callable[[], T], *, retries: int, backoff: float) -> T:
    """`request()` (a small request to `url`), retried with back-off on Transient failures."""
    for attempt in range(retries + 1):
        try:
            return request()
        except Transient as error:
            if attempt == retries:
                raise UserError(f"{url}: failed after {attempt + 1} attempts: {error}") from None
            delay = error.retry_after if error.retry_after is not None else backoff * 2**attempt
            log.warning("%s: %s; retry %d/%d in %.1f s", url, error, attempt + 1, retries, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _retry_after(value: str | None) -> float | None:
    if value and _is_number(value.strip()):
        return min(float(value), MAX_RETRY_AFTER)
    return None


def meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def read_meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def remove_part(part: Path) -> None:
    part.unlink(missing_ok=True)
    meta_path(part).unlink(missing_ok=True)


# --- progress ------------------------------------------------------------------------------------


class _Progress:
    """A tqdm bar (bytes, rate, ETA) on a terminal; a log line every 30 s otherwise (CI, nohup)."""

    def __init__(self, name: str, total: int | None, initial: int):
        self.name, self.total, self.done = name, total, initial
        self.bar = tqdm(
            total=total,
            initial=initial,
            desc=name,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            disable=not sys.stderr.isatty(),
        )
        self.started = self.last_log = time.monotonic()
        self.start_bytes = initial

    def update(self, count: int) -> None:
        self.done += count
        self.bar.update(count)
        now = time.monotonic()
        if self.bar.disable and now - self.last_log >= LOG_EVERY_SECONDS:
            self.last_log = now
            rate = (self.done - self.start_bytes) / (now - self.started)
            of_total = f" of {human(self.total)} ({100 * self.done / self.total:.0f}%)" if self.total else ""
            log.info("%s: %s%s, %s/s", self.name, human(self.done), of_total, human(rate))

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
