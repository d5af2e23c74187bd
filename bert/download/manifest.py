"""Manifests of local sources: small files that stand for a user's files, so DVC never opens one.

DVC hashes only the paths written in dvc.yaml, and its templating cannot turn a list of sources
from params into `deps` (docs/downloads.md#tracking-local-sources). So each download stage depends
on one small JSON file, its *manifest*, which the `sources` stage rewrites at every `dvc repro`:
every source as given and, for a local one, the regular files its walk finds (bert.source_tree),
each with its size and SHA-256. An edited, added or removed file changes the manifest, which reruns
exactly its download; a URL is listed by its text only (never contacted). DVC reads the manifest,
never the user's files, so a FIFO or a vanished folder cannot hang or break `dvc status`: only the
`sources` stage meets them, and it answers in one line.

Hashing reads every file, so digests are kept in a cache (`HashCache`, a file outside DVC's outputs
and git) under the file's identity: device, inode, size, mtime and ctime (ctime too: `cp -p` or
`touch -r` can put back an old mtime, not an old ctime). An unchanged 20 GB corpus is stat-ed, not
read, when the stage runs again.

A download stage reads its sources through the walker again, and checks what it reads against the
manifest (`Manifest.check_tree`, `Manifest.check_file`): a file added, removed or edited after the
`sources` stage ran is one line, and the next `dvc repro` hashes it anew.
"""

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bert.download.transport import CHUNK_SIZE, local_path
from bert.errors import UserError
from bert.source_tree import Rules, SourceTree, open_regular, printable, walk_source

log = logging.getLogger(__name__)

ALGORITHM = "sha256"
RERUN = "run `dvc repro` again (its `sources` stage hashes the sources anew)"


def file_digest(path: Path, shown: str) -> tuple[int, str]:
    """(size, SHA-256) of the regular file `path`, read through open_regular (never a FIFO's wait)."""
    hasher, size = hashlib.new(ALGORITHM), 0
    with open_regular(path, shown) as file:
        while chunk := file.read(CHUNK_SIZE):
            hasher.update(chunk)
            size += len(chunk)
    return size, hasher.hexdigest()


@dataclass
class HashCache:
    """Digests of files by identity ({real path: [device, inode, size, mtime_ns, ctime_ns, sha256]}),
    kept in the JSON file `path` between runs; `read` counts the files hashed (not found here)."""

    path: Path
    entries: dict[str, list] = field(default_factory=dict)
    read: int = 0
    read_bytes: int = 0

    @classmethod
    def load(cls, path: Path) -> "HashCache":
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # absent or damaged: a cache, so start afresh
            entries = {}
        return cls(path, entries if isinstance(entries, dict) else {})

    def digest(self, path: Path, shown: str) -> tuple[int, str]:
        """(size, SHA-256) of `path`: from the cache when the file is the one hashed before, else read."""
        with open_regular(path, shown) as file:  # the identity of what is open, not of a name swapped since
            info = os.fstat(file.fileno())
        identity = [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
        real = os.path.realpath(path)
        cached = self.entries.get(real)
        if isinstance(cached, list) and len(cached) == 6 and cached[:5] == identity:
            return info.st_size, cached[5]
        size, digest = file_digest(path, shown)
        # The identity from before the read: a file written meanwhile has another one, and is read again.
        self.entries[real] = [*identity, digest]
        self.read += 1
        self.read_bytes += size
        return size, digest

    def save(self) -> None:
        """Write the cache (atomically), less the files that are gone."""
        kept = {name: entry for name, entry in self.entries.items() if os.path.lexists(name)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        temporary.write_text(json.dumps(kept, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.path)


def build_manifest(sources: Sequence[str], param: str, rules: Rules, hashes: HashCache) -> dict:
    """The manifest of `sources` (listed by the param `param`, for messages): every source is walked
    under `rules` before any file is read, so a bad one is refused in one line before any work."""
    trees = [None if local_path(source) is None else walk_source(source, local_path(source), rules, param)
             for source in sources]  # fmt: skip
    entries = []
    for source, tree in zip(sources, trees):
        if tree is None:
            entries.append({"source": source})
        elif not tree.is_folder:
            size, digest = hashes.digest(tree.path, f"{param}: {source}")
            entries.append({"source": source, "size": size, ALGORITHM: digest})
        else:
            files = {}
            for name in tree.files:
                size, digest = hashes.digest(tree.path / name, f"{param}: {source.rstrip('/')}/{name}")
                files[name] = {"size": size, ALGORITHM: digest}
            entries.append({"source": source, "files": files})
    return {"param": param, "sources": entries}


def write_manifest(path: Path, manifest: dict) -> None:
    """The same manifest gives the same bytes (DVC compares their hash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


class Manifest:
    """A download stage's manifest, against which it checks the local files it reads."""

    def __init__(self, data: dict, path: Path):
        self.path, self.param = path, data["param"]
        self.expected: dict[str, dict] = {}  # the path a download opens -> {size, sha256}
        self.folders: dict[str, dict] = {}  # a folder source's path -> its files
        for entry in data["sources"]:
            where = local_path(entry["source"])
            if "files" in entry:
                self.folders[str(where)] = entry["files"]
                self.expected.update({str(where / name): facts for name, facts in entry["files"].items()})
            elif where is not None:
                self.expected[str(where)] = entry

    @classmethod
    def read(cls, path: Path, param: str, sources: Sequence[str]) -> "Manifest | None":
        """The manifest at `path` when it was written for `sources` (the param `param` as it is now);
        else None, and a warning: the stage runs outside `dvc repro`, which runs `sources` first."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data["param"] == param and [entry["source"] for entry in data["sources"]] == list(sources):
                return cls(data, path)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        log.warning(
            "%s: no manifest of these sources in %s (the stage runs outside `dvc repro`, which runs the "
            "`sources` stage first): the files read are not checked against it",
            param,
            path,
        )
        return None

    def check_tree(self, tree: SourceTree) -> None:
        """A UserError if the folder `tree` holds other files than when the `sources` stage listed it."""
        listed = self.folders.get(str(tree.path))
        if listed is None or not tree.is_folder or set(listed) == set(tree.files):
            return
        added, removed = sorted(set(tree.files) - set(listed)), sorted(set(listed) - set(tree.files))
        changes = [f"{printable(name)} added" for name in added] + [
            f"{printable(name)} removed" for name in removed
        ]
        raise UserError(
            f"{self.param}: {printable(tree.source)} changed since the `sources` stage listed it "
            f"({', '.join(changes[:3])}{', ...' if len(changes) > 3 else ''}); {RERUN}"
        )

    def check_file(self, source: str, size: int, digest: str | None) -> None:
        """A UserError if the local file `source` (as the download opened it) read as other bytes than
        the `sources` stage hashed (`digest`: the SHA-256 of what was read)."""
        where = local_path(source)
        if where is None:
            return
        expected = self.expected.get(str(where))
        if expected is None:
            raise UserError(f"{self.param}: {printable(source)} is not in {self.path}; {RERUN}")
        if (expected["size"], expected[ALGORITHM]) != (size, digest):
            then = expected["size"]
            detail = "the same size, other bytes" if then == size else f"{then} bytes then, {size} now"
            raise UserError(
                f"{self.param}: {printable(source)} changed since the `sources` stage hashed it ({detail}); {RERUN}"
            )
