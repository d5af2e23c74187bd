"""Checksums: "sha1:<hex>", "md5:<hex>", "sha256:<hex>", or "published": the sha1 (else md5) sum
that Wikimedia publishes next to every dump as `<wiki>-<date>-sha1sums.txt`; for a local file, a
`*sha1sums.txt` / `*md5sums.txt` file beside it."""

import logging
import re

from bert.download.transport import SourceNotFound, fetch_text, file_name, is_url, local_path
from bert.errors import UserError
from bert.source_tree import open_regular

log = logging.getLogger(__name__)
HASH_LENGTHS = {"sha1": 40, "md5": 32, "sha256": 64}
WIKIMEDIA_NAME = re.compile(r"^(?P<wiki>[a-z0-9_]+)-(?P<date>\d{8}|latest)-")


def expected_checksum(source: str, checksum: str | None, **fetch_options) -> tuple[str, str] | None:
    """(algorithm, lower-case hex digest) to verify against, or None for no check."""
    if not checksum:
        return None
    if checksum == "published":
        return published_checksum(source, **fetch_options)
    algorithm, _, digest = checksum.partition(":")
    algorithm, digest = algorithm.lower(), digest.strip().lower()
    if algorithm not in HASH_LENGTHS or not re.fullmatch(f"[0-9a-f]{{{HASH_LENGTHS[algorithm]}}}", digest):
        raise UserError(
            f"{source}: checksum {checksum!r} is not valid; use sha1:<40 hex>, md5:<32 hex>, "
            "sha256:<64 hex>, published (Wikimedia dumps) or null"
        )
    return algorithm, digest


def published_checksum(source: str, **fetch_options) -> tuple[str, str]:
    name = file_name(source)
    match = WIKIMEDIA_NAME.match(name)
    if is_url(source):
        if not match:
            raise UserError(
                f"{source}: checksum 'published' works for Wikimedia dumps named <wiki>-<date>-...; "
                "give sha1:/md5:/sha256:<hex> or null instead"
            )
        folder = source.rsplit("/", 1)[0]
        for algorithm in ("sha1", "md5"):
            sums_url = f"{folder}/{match['wiki']}-{match['date']}-{algorithm}sums.txt"
            try:
                text = fetch_text(sums_url, **fetch_options)
            except SourceNotFound:
                continue
            digest = find_sum(text, name)
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
    path = local_path(source)
    for algorithm in ("sha1", "md5"):
        candidates = sorted(path.parent.glob(f"*{algorithm}sums.txt"))
        if match:  # the sums file of this dump first
            prefix = f"{match['wiki']}-{match['date']}-"
            candidates.sort(key=lambda p: not p.name.startswith(prefix))
        for sums in candidates:
            with open_regular(sums, str(sums)) as file:  # a FIFO there must not hang the download
                digest = find_sum(file.read().decode("utf-8", errors="replace"), name)
            if digest is not None:
                log.info("%s: published %s from %s", name, algorithm, sums)
                return algorithm, digest
    raise UserError(
        f"{source}: checksum 'published' but no *sha1sums.txt / *md5sums.txt beside it lists {name}; "
        "put the dump's sums file next to it, give sha1:<hex>, or null"
    )


def find_sum(text: str, name: str) -> str | None:
    """The digest for `name` in a `sha1sum`/`md5sum` listing ('<hex>  <name>' or '<hex> *<name>')."""
    for line in text.splitlines():
        fields = line.strip().split(maxsplit=1)
        if len(fields) == 2 and fields[1].lstrip("*") == name:
            return fields[0].lower()
    return None
