"""One file from a source to its destination, verified: it appears at `dest` only when it is
complete and its checksum (if any) matched. Until then the bytes live in `<dest>.part` beside it
(bert.download.transport); a checksum mismatch removes the `.part` (its bytes are wrong, resuming
them would be too)."""

import logging
import os
import time
from pathlib import Path

from bert.download.checksums import expected_checksum
from bert.download.transport import (
    BACKOFF_SECONDS,
    RETRIES,
    TIMEOUT_SECONDS,
    copy_local,
    download_http,
    human,
    is_url,
    local_path,
    local_version,
    meta_path,
    remove_part,
)
from bert.errors import UserError

log = logging.getLogger(__name__)


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
    fetch(str(source), dest, checksum, retries=retries, backoff=backoff, timeout=timeout)
    return dest


def fetch(
    source: str, dest: Path, checksum: str | None, *, retries: int, backoff: float, timeout: float
) -> dict:
    """`download`'s work; returns what identifies the version fetched (see is_current)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    expected = expected_checksum(source, checksum, retries=retries, backoff=backoff, timeout=timeout)
    algorithm = expected[0] if expected else None
    started = time.monotonic()
    if is_url(source):
        log.info("downloading %s -> %s", source, dest)
        digest, meta = download_http(
            source, part, algorithm, retries=retries, backoff=backoff, timeout=timeout
        )
        version = {"etag": meta.get("etag"), "last_modified": meta.get("last_modified")}
    else:
        path = local_path(source)
        log.info("copying %s -> %s", path, dest)
        version = {"stat": local_version(path)}  # before the copy: a change during it shows next time
        digest, version["sha256"] = copy_local(path, part, algorithm)
    if expected:
        if digest != expected[1]:
            remove_part(part)
            raise UserError(
                f"{source}: checksum mismatch: expected {algorithm}:{expected[1]}, got {algorithm}:{digest}; "
                "the download was corrupted or the checksum is wrong — check it, then run again "
                "(the bad partial file was removed)"
            )
        log.info("%s: %s checksum OK", dest.name, algorithm)
    os.replace(part, dest)
    meta_path(part).unlink(missing_ok=True)
    size = dest.stat().st_size
    seconds = time.monotonic() - started
    log.info(
        "%s: done, %s in %.1f s (%s/s)", dest.name, human(size), seconds, human(size / max(seconds, 1e-9))
    )
    checksum_record = f"{algorithm}:{digest}" if expected else None
    return {"source": source, "size": size, "checksum": checksum_record, **version}
