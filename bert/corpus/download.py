"""Fetch a file from an https://, http://, file:// URL or a local path, resumably and verified.

The one rule: a file appears at its destination only when it is complete and its checksum (if
any) matched. Until then the bytes live in `<dest>.part` beside it:

- an interrupted HTTP download (connection cut, timeout, 5xx, 429, a body shorter than its
  Content-Length) is retried with exponential back-off, each retry resuming the `.part` with a
  `Range: bytes=N-` request; when the retries run out the `.part` is KEPT, so a re-run resumes;
- a server that answers a Range request with the whole file (200) cannot resume: we start over
  from byte 0 once, and if that transfer is cut too we stop with an error (the `.part` is removed,
  being of no use to a server that cannot resume);
- a checksum mismatch removes the `.part` (its bytes are wrong, resuming them would be too);
- a 404/410 (`SourceNotFound`), 401/403 or other 4xx is not retried;
- a server that sends less than MIN_BYTES_PER_WINDOW in RATE_WINDOW_SECONDS (or nothing for
  `timeout` seconds) is cut off and retried like a cut connection; without a terminal a progress
  line is logged every LOG_EVERY_SECONDS, however slowly the bytes come.

`.part.json` beside the `.part` remembers which URL it came from and the server's ETag /
Last-Modified, so a `.part` is never resumed from a different URL, a file that changed on the
server since (If-Range) is fetched again from the start rather than spliced, and a `.part` from a
server that gives neither is never resumed (nothing proves it is the same file).

`download_staged` is `download` into a staging folder that survives failed runs: a file finished
there by an earlier run is reused only when it is provably the same version of its source (the
configured checksum; else a local file's size and modification times; else the server's ETag or
Last-Modified and size, asked with a conditional request) — otherwise it is fetched again.

Checksums: "sha1:<hex>", "md5:<hex>", "sha256:<hex>", or "published": the sha1 (else md5) sum that
Wikimedia publishes next to every dump as `<wiki>-<date>-sha1sums.txt`; for a local file, a
`*sha1sums.txt` / `*md5sums.txt` file beside it. Only the standard library is used.
"""

import hashlib
import http.client
import json
import logging
import os
import re
import shutil
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TypeVar

from tqdm import tqdm

from bert.atomic import atomic_folder
from bert.errors import UserError

log = logging.getLogger(__name__)
T = TypeVar("T")

CHUNK_SIZE = 1 << 20
USER_AGENT = "bert-dvc/0.1 (BERT pretraining pipeline; Python urllib)"
HASH_LENGTHS = {"sha1": 40, "md5": 32, "sha256": 64}
RETRY_STATUSES = {408, 425, 429, 500, 502, 503, 504}
NOT_FOUND_STATUSES = {404, 410}
MAX_RETRY_AFTER = 300.0
LOG_EVERY_SECONDS = 30.0
RETRIES, BACKOFF_SECONDS, TIMEOUT_SECONDS = 5, 1.0, 60.0  # a failed attempt is retried after 1, 2, 4... s
# A stalled server (bytes trickling in) would keep an attempt alive for ever: less than this many
# bytes in a window of this many seconds cuts the attempt (1 KiB/s averaged over a minute).
MIN_BYTES_PER_WINDOW = 64 * 1024
RATE_WINDOW_SECONDS = 60.0
WIKIMEDIA_NAME = re.compile(r"^(?P<wiki>[a-z0-9_]+)-(?P<date>\d{8}|latest)-")


class SourceNotFound(UserError):
    """The source does not exist: HTTP 404/410, or a local path that is not there."""


class _Transient(Exception):
    """A failure worth retrying: a cut connection, a timeout, a 5xx or 429."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def download(
    source: str | Path,
    dest_path: str | Path,
    checksum: str | None = None,
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF_SECONDS,
    timeout: float = TIMEOUT_SECONDS,
) -> Path:
    """Fetch `source` (URL or local file) to `dest_path`; see the module docstring for the rules."""
    dest = Path(dest_path)
    _fetch(str(source), dest, checksum, retries=retries, backoff=backoff, timeout=timeout)
    return dest


def download_staged(
    source: str | Path,
    target: Path,
    checksum: str | None = None,
    *,
    retries: int = RETRIES,
    backoff: float = BACKOFF_SECONDS,
    timeout: float = TIMEOUT_SECONDS,
) -> Path:
    """`download` into a staging folder (see staging_dir), where `target` may be left complete by an
    earlier, failed run: it is reused only when it is provably the same version of `source`, else
    fetched again. The proof is kept beside it in `.<name>.source.json`."""
    source = str(source)
    options = {"retries": retries, "backoff": backoff, "timeout": timeout}
    record_path = target.with_name(f".{target.name}.source.json")
    if target.exists():
        if _is_current(source, target, checksum, _read_meta(record_path), options):
            log.info("%s: already complete from an earlier run (the same version of %s)", target, source)
            return target
        log.info("%s: %s may have changed since an earlier run fetched it; fetching it again", target, source)
        target.unlink()
    record_path.unlink(missing_ok=True)
    version = _fetch(source, target, checksum, **options)
    record_path.write_text(json.dumps(version), encoding="utf-8")
    return target


def _fetch(
    source: str, dest: Path, checksum: str | None, *, retries: int, backoff: float, timeout: float
) -> dict:
    """`download`'s work; returns what identifies the version fetched (see _is_current)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    expected = _expected_checksum(source, checksum, retries=retries, backoff=backoff, timeout=timeout)
    algorithm = expected[0] if expected else None
    started = time.monotonic()
    if _is_url(source):
        log.info("downloading %s -> %s", source, dest)
        digest, meta = _download_http(
            source, part, algorithm, retries=retries, backoff=backoff, timeout=timeout
        )
        version = {"etag": meta.get("etag"), "last_modified": meta.get("last_modified")}
    else:
        path = _local_path(source)
        log.info("copying %s -> %s", path, dest)
        version = {"stat": _local_version(path)}  # before the copy: a change during it shows next time
        digest = _copy_local(path, part, algorithm)
    if expected:
        if digest != expected[1]:
            _remove_part(part)
            raise UserError(
                f"{source}: checksum mismatch: expected {algorithm}:{expected[1]}, got {algorithm}:{digest}; "
                "the download was corrupted or the checksum is wrong — check it, then run again "
                "(the bad partial file was removed)"
            )
        log.info("%s: %s checksum OK", dest.name, algorithm)
    os.replace(part, dest)
    _meta_path(part).unlink(missing_ok=True)
    size = dest.stat().st_size
    seconds = time.monotonic() - started
    log.info(
        "%s: done, %s in %.1f s (%s/s)", dest.name, _human(size), seconds, _human(size / max(seconds, 1e-9))
    )
    checksum_record = f"{algorithm}:{digest}" if expected else None
    return {"source": source, "size": size, "checksum": checksum_record, **version}


def _is_current(source: str, target: Path, checksum: str | None, record: dict, options: dict) -> bool:
    """Whether `target`, fetched earlier with `record` (from _fetch), is provably what fetching
    `source` now would give."""
    if record.get("source") != source or record.get("size") != target.stat().st_size:
        return False
    if checksum:  # the bytes were verified against it; the same expected sum means the same file
        algorithm, digest = _expected_checksum(source, checksum, **options)
        return record.get("checksum") == f"{algorithm}:{digest}"
    if not _is_url(source):
        return record.get("stat") == _local_version(_local_path(source))
    return _unchanged_on_server(source, record, **options)


def _local_version(path: Path) -> list[int] | None:
    """Size and modification times (ctime too: `cp -p` or `touch -r` can put back an old mtime)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _unchanged_on_server(url: str, record: dict, *, retries: int, backoff: float, timeout: float) -> bool:
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

    return _retrying(url, ask, retries=retries, backoff=backoff)


def download_many(
    sources: Sequence[str | Path],
    dest_dir: str | Path,
    checksums: Sequence[str | None] | None = None,
    **options,
) -> list[Path]:
    """Fetch every source into `dest_dir`, named after the URL's (or path's) file name.

    A local directory source contributes its files (not sub-folders, not hidden files), sorted by
    name. Two sources with the same file name are an error. Files go through `download_staged`, so a
    re-run after a failure into the same (staging) folder fetches only what is missing or changed.
    `options` go to `download_staged`. Returns the paths, in source order.
    """
    checksums = list(checksums or [None] * len(sources))
    if len(checksums) != len(sources):
        raise UserError(
            f"{len(sources)} sources but {len(checksums)} checksums; give one checksum per source or none"
        )
    dest_dir = Path(dest_dir)
    plan: dict[str, tuple[str, str | None]] = {}
    for source, checksum in zip(sources, checksums):
        for item, name in _expand(str(source), checksum):
            if name in plan:
                raise UserError(
                    f"two sources have the same file name {name!r}: {plan[name][0]} and {item}; "
                    "rename one of them (files from all sources land in one folder)"
                )
            plan[name] = (item, checksum)
    return [
        download_staged(item, dest_dir / name, checksum, **options) for name, (item, checksum) in plan.items()
    ]


def staging_dir(out_dir: str | Path, sources: object) -> Path:
    """The folder where downloads for `out_dir` collect until all are done: `<parent>/.partial/<name>`.

    It survives a failed run, so the re-run resumes its `.part` files and keeps those of its finished
    files that are still current (download_staged).
    `sources` (anything JSON-able, e.g. the source URLs and checksums) is recorded in it; when it
    differs from the recorded one, the folder is emptied so nothing from other sources is reused.
    """
    out_dir = Path(out_dir)
    partial_root = out_dir.parent / ".partial"
    staging = partial_root / out_dir.name
    partial_root.mkdir(parents=True, exist_ok=True)
    # Keep the partial downloads out of git without a change to the project's .gitignore.
    (partial_root / ".gitignore").write_text("*\n", encoding="utf-8")
    record = staging / ".sources.json"
    wanted = json.dumps(sources, sort_keys=True)
    if staging.exists() and (not record.exists() or record.read_text(encoding="utf-8") != wanted):
        log.info("%s: sources changed since the interrupted run; discarding its partial files", staging)
        shutil.rmtree(staging)
    staging.mkdir(exist_ok=True)
    record.write_text(wanted, encoding="utf-8")
    return staging


def publish(files: Mapping[str, Path], out_dir: str | Path) -> None:
    """Move `files` ({relative name: path}) into a new folder that replaces `out_dir` (bert.atomic),
    so `out_dir` is either absent, the previous complete version, or the new complete version."""
    with atomic_folder(out_dir) as building:
        for name, path in files.items():
            target = building / name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)


def remove_staging(staging: Path) -> None:
    """Delete a staging folder once its files are published, and `.partial` itself when empty."""
    shutil.rmtree(staging, ignore_errors=True)
    partial_root = staging.parent
    if [entry.name for entry in partial_root.iterdir()] == [".gitignore"]:
        shutil.rmtree(partial_root)


def file_name(source: str) -> str:
    """The file name a source will be saved under: the last part of the URL path, or the path's name."""
    if _is_url(source) or source.startswith("file://"):
        name = PurePosixPath(urllib.parse.unquote(urllib.parse.urlparse(source).path)).name
    else:
        name = Path(source).name
    if not name:
        raise UserError(f"{source}: no file name in the URL path; point at a file, not a folder")
    return name


# --- sources -------------------------------------------------------------------------------------


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _local_path(source: str) -> Path:
    if source.startswith("file://"):
        return Path(urllib.request.url2pathname(urllib.parse.urlparse(source).path))
    if "://" in source:
        raise UserError(f"{source}: unsupported URL scheme; use https://, http://, file:// or a local path")
    return Path(source)


def _expand(source: str, checksum: str | None) -> Iterable[tuple[str, str]]:
    """(source, file name) pairs: one for a file or URL, one per file for a local directory."""
    if not _is_url(source):
        path = _local_path(source)
        if path.is_dir():
            if checksum:
                raise UserError(
                    f"{source}: a checksum applies to one file, not a folder; list the files instead"
                )
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not files:
                raise UserError(f"{source}: the folder has no files")
            return [(str(p), p.name) for p in files]
        if not path.exists():
            raise SourceNotFound(f"{source}: no such file or folder; check the path")
    return [(source, file_name(source))]


# --- checksums -----------------------------------------------------------------------------------


def _expected_checksum(source: str, checksum: str | None, **fetch_options) -> tuple[str, str] | None:
    """(algorithm, lower-case hex digest) to verify against, or None for no check."""
    if not checksum:
        return None
    if checksum == "published":
        return _published_checksum(source, **fetch_options)
    algorithm, _, digest = checksum.partition(":")
    algorithm, digest = algorithm.lower(), digest.strip().lower()
    if algorithm not in HASH_LENGTHS or not re.fullmatch(f"[0-9a-f]{{{HASH_LENGTHS[algorithm]}}}", digest):
        raise UserError(
            f"{source}: checksum {checksum!r} is not valid; use sha1:<40 hex>, md5:<32 hex>, "
            "sha256:<64 hex>, published (Wikimedia dumps) or null"
        )
    return algorithm, digest


def _published_checksum(source: str, **fetch_options) -> tuple[str, str]:
    name = file_name(source)
    match = WIKIMEDIA_NAME.match(name)
    if _is_url(source):
        if not match:
            raise UserError(
                f"{source}: checksum 'published' works for Wikimedia dumps named <wiki>-<date>-...; "
                "give sha1:/md5:/sha256:<hex> or null instead"
            )
        folder = source.rsplit("/", 1)[0]
        for algorithm in ("sha1", "md5"):
            sums_url = f"{folder}/{match['wiki']}-{match['date']}-{algorithm}sums.txt"
            try:
                text = _fetch_text(sums_url, **fetch_options)
            except SourceNotFound:
                continue
            digest = _find_sum(text, name)
            if digest is None:
                raise UserError(
                    f"{sums_url} lists no checksum for {name}; check the dump URL or give the checksum"
                )
            log.info("%s: published %s from %s", name, algorithm, sums_url)
            return algorithm, digest
        raise UserError(
            f"{source}: no published {match['wiki']}-{match['date']}-sha1sums.txt or -md5sums.txt next to it; "
            "give sha1:<hex> yourself or null"
        )
    path = _local_path(source)
    for algorithm in ("sha1", "md5"):
        candidates = sorted(path.parent.glob(f"*{algorithm}sums.txt"))
        if match:  # the sums file of this dump first
            prefix = f"{match['wiki']}-{match['date']}-"
            candidates.sort(key=lambda p: not p.name.startswith(prefix))
        for sums in candidates:
            digest = _find_sum(sums.read_text(encoding="utf-8", errors="replace"), name)
            if digest is not None:
                log.info("%s: published %s from %s", name, algorithm, sums)
                return algorithm, digest
    raise UserError(
        f"{source}: checksum 'published' but no *sha1sums.txt / *md5sums.txt beside it lists {name}; "
        "put the dump's sums file next to it, give sha1:<hex>, or null"
    )


def _find_sum(text: str, name: str) -> str | None:
    """The digest for `name` in a `sha1sum`/`md5sum` listing ('<hex>  <name>' or '<hex> *<name>')."""
    for line in text.splitlines():
        fields = line.strip().split(maxsplit=1)
        if len(fields) == 2 and fields[1].lstrip("*") == name:
            return fields[0].lower()
    return None


def _hash_file(path: Path, algorithm: str, limit: int | None = None) -> "hashlib._Hash":
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


def _copy_local(path: Path, part: Path, algorithm: str | None) -> str | None:
    if not path.is_file():
        raise SourceNotFound(f"{path}: no such file; check the path")
    hasher = hashlib.new(algorithm) if algorithm else None
    # Local copies are fast and cannot be cut by a network, so they always start from byte 0.
    with (
        open(path, "rb") as source,
        open(part, "wb") as out,
        _Progress(path.name, path.stat().st_size, 0) as bar,
    ):
        while chunk := source.read(CHUNK_SIZE):
            out.write(chunk)
            if hasher:
                hasher.update(chunk)
            bar.update(len(chunk))
    return hasher.hexdigest() if hasher else None


# --- HTTP ----------------------------------------------------------------------------------------


def _download_http(
    url: str, part: Path, algorithm: str | None, *, retries: int, backoff: float, timeout: float
) -> tuple[str | None, dict]:
    """Fill `part` from `url`, resuming and retrying; returns the hex digest of the whole file and
    what the server said about it (`.part.json`: ETag, Last-Modified, size)."""
    meta_path = _meta_path(part)
    meta = _read_meta(meta_path)
    if part.exists() and meta.get("source") != url:
        log.info("%s: left over from another source; starting over", part)
        _remove_part(part)
        meta = {}
    elif part.exists() and not (meta.get("etag") or meta.get("last_modified")):
        log.info(
            "%s: the server gave no ETag or Last-Modified to prove it is the same file; starting over", part
        )
        _remove_part(part)
    failures = 0
    server_ignores_range = False
    while True:
        offset = part.stat().st_size if part.exists() else 0
        validator = meta.get("etag") or meta.get("last_modified")
        headers = {}
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if validator:
                headers["If-Range"] = validator
        try:
            with _open(url, headers, timeout) as response:
                if response.status == 416:
                    offset = _handle_unsatisfiable_range(response, part, offset)
                    if offset == 0:
                        continue
                    total = offset
                else:
                    new_validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
                    if offset and response.status == 200:
                        if validator and new_validator and new_validator != validator:
                            log.info(
                                "%s: the file changed on the server since the partial download; starting over",
                                url,
                            )
                        else:
                            log.warning(
                                "%s: the server ignored the Range request (no resume); starting over", url
                            )
                            server_ignores_range = True
                        offset = 0
                    elif response.status == 206:
                        _check_content_range(response, part, offset)
                        if new_validator and new_validator != validator:  # If-Range ignored
                            _remove_part(part)
                            raise _Transient("the file changed on the server since the partial download")
                    total = _total_size(response, offset)
                    meta = {
                        "source": url,
                        "etag": response.headers.get("ETag"),
                        "last_modified": response.headers.get("Last-Modified"),
                        "total": total,
                    }
                    meta_path.write_text(json.dumps(meta), encoding="utf-8")
                    if offset:
                        log.info("%s: resuming at %s of %s", part.name, _human(offset), _human(total))
                hasher = None
                if algorithm:  # on resume, the bytes already on disk are part of the digest too
                    hasher = _hash_file(part, algorithm, offset) if offset else hashlib.new(algorithm)
                if response.status != 416:
                    _stream(response, part, offset, total, hasher)
            return (hasher.hexdigest() if hasher else None), meta
        except _Transient as error:
            if server_ignores_range:
                _remove_part(part)
                raise UserError(
                    f"{url}: the server does not support resuming downloads (it answered a Range request "
                    f"with the whole file) and the transfer was cut again ({error}); try again later, or fetch "
                    "the file another way and give its local path"
                ) from None
            failures += 1
            if not (meta.get("etag") or meta.get("last_modified")):
                _remove_part(part)  # see above: such a .part cannot be resumed
            have = part.stat().st_size if part.exists() else 0
            if failures > retries:
                kept = f"; {_human(have)} kept in {part}, run again to resume" if have else ""
                raise UserError(f"{url}: failed after {failures} attempts: {error}{kept}") from None
            delay = error.retry_after if error.retry_after is not None else backoff * 2 ** (failures - 1)
            log.warning("%s: %s; retry %d/%d in %.1f s", url, error, failures, retries, delay)
            time.sleep(delay)


def _open(url: str, headers: dict[str, str], timeout: float) -> http.client.HTTPResponse:
    """urlopen that sorts failures: _Transient (retry), SourceNotFound, UserError (give up)."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code in (304, 416):
            return error  # the caller reads its status and headers
        error.close()
        status = f"HTTP {error.code} {error.reason}"
        if error.code in RETRY_STATUSES or error.code >= 500:
            raise _Transient(status, _retry_after(error.headers.get("Retry-After"))) from None
        if error.code in NOT_FOUND_STATUSES:
            raise SourceNotFound(f"{url}: {status}; the file is not there — check the URL") from None
        if error.code in (401, 403):
            raise UserError(
                f"{url}: {status}; access denied — check the URL, or download the file by hand and give its local path"
            ) from None
        raise UserError(f"{url}: {status}; check the URL") from None
    except urllib.error.URLError as error:
        raise _Transient(f"cannot reach the server ({error.reason}); check the URL and the network") from None
    except (OSError, http.client.HTTPException) as error:
        raise _Transient(f"connection failed ({error!r})") from None


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
        raise _Transient(f"connection closed after {received} of {total} bytes")


def _chunks(response, received: int) -> Iterator[bytes]:
    """The body as it arrives: read1 returns after one network read, so even a slow server yields
    chunks (and progress lines). A server that sends less than MIN_BYTES_PER_WINDOW in
    RATE_WINDOW_SECONDS is cut off (_Transient); one that sends nothing times out in `timeout`."""
    window_start, window_bytes = time.monotonic(), 0
    while True:
        try:
            chunk = response.read1(CHUNK_SIZE)
        except (OSError, http.client.HTTPException) as error:
            raise _Transient(f"connection cut after {_human(received)} ({error!r})") from None
        if not chunk:
            return
        received += len(chunk)
        window_bytes += len(chunk)
        yield chunk
        elapsed = time.monotonic() - window_start
        if elapsed >= RATE_WINDOW_SECONDS:
            if window_bytes < MIN_BYTES_PER_WINDOW:
                raise _Transient(
                    f"too slow: {_human(window_bytes)} in the last {elapsed:.1f} s "
                    f"({_human(window_bytes / elapsed)}/s, under the minimum of {_human(MIN_BYTES_PER_WINDOW)} "
                    f"per {RATE_WINDOW_SECONDS:g} s); try again later or from another mirror, or download "
                    "the file by hand and give its local path"
                )
            window_start, window_bytes = time.monotonic(), 0


def _total_size(response, offset: int) -> int | None:
    if response.status == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        if total.isdigit():
            return int(total)
    length = response.headers.get("Content-Length")
    if length is None or not length.isdigit():
        return None
    return int(length) + (offset if response.status == 206 else 0)


def _check_content_range(response, part: Path, offset: int) -> None:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    if not match or int(match[1]) != offset:
        _remove_part(part)  # the next attempt starts from byte 0 rather than splice at a wrong offset
        raise _Transient(
            f"asked for bytes from {offset}, got Content-Range {response.headers.get('Content-Range')!r}"
        )


def _handle_unsatisfiable_range(response, part: Path, offset: int) -> int:
    """416 to 'bytes=N-': if N is the file size the .part is complete; else start over (returns 0)."""
    total = response.headers.get("Content-Range", "").rpartition("/")[2]
    if total.isdigit() and int(total) == offset:
        return offset
    log.info("%s: the partial file does not fit the file on the server; starting over", part)
    _remove_part(part)
    return 0


def _fetch_text(url: str, *, retries: int, backoff: float, timeout: float) -> str:
    """A small text file (a sums listing), with the same retries and minimum rate as a download."""

    def fetch() -> str:
        with _open(url, {}, timeout) as response:
            return b"".join(_chunks(response, 0)).decode("utf-8", errors="replace")

    return _retrying(url, fetch, retries=retries, backoff=backoff)


def _retrying(url: str, request: Callable[[], T], *, retries: int, backoff: float) -> T:
    """`request()` (a small request to `url`), retried with back-off on _Transient failures."""
    for attempt in range(retries + 1):
        try:
            return request()
        except _Transient as error:
            if attempt == retries:
                raise UserError(f"{url}: failed after {attempt + 1} attempts: {error}") from None
            delay = error.retry_after if error.retry_after is not None else backoff * 2**attempt
            log.warning("%s: %s; retry %d/%d in %.1f s", url, error, attempt + 1, retries, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _retry_after(value: str | None) -> float | None:
    if value and value.strip().isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    return None


def _meta_path(part: Path) -> Path:
    return part.with_name(part.name + ".json")


def _read_meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _remove_part(part: Path) -> None:
    part.unlink(missing_ok=True)
    _meta_path(part).unlink(missing_ok=True)


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
            of_total = f" of {_human(self.total)} ({100 * self.done / self.total:.0f}%)" if self.total else ""
            log.info("%s: %s%s, %s/s", self.name, _human(self.done), of_total, _human(rate))

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def _human(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
