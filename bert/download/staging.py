"""Downloads into a staging folder, published as one folder when all are done.

`download_staged` is `download` into a staging folder that survives failed runs: a file finished
there by an earlier run is reused only when it is provably the same version of its source (the
configured checksum; else a local file's size and modification times; else the server's ETag or
Last-Modified and size, asked with a conditional request) — otherwise it is fetched again.
"""

import json
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from bert.atomic import atomic_folder
from bert.download.checksums import expected_checksum
from bert.download.fetch import fetch
from bert.download.manifest import Manifest
from bert.download.transport import (
    BACKOFF_SECONDS,
    RETRIES,
    TIMEOUT_SECONDS,
    expand,
    is_url,
    local_path,
    local_version,
    read_meta,
    unchanged_on_server,
)
from bert.errors import UserError
from bert.inputs import check_content
from bert.source_tree import STRICT, Rules, SourceTree, walk_source

log = logging.getLogger(__name__)


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
        if is_current(source, target, checksum, read_meta(record_path), options):
            log.info("%s: already complete from an earlier run (the same version of %s)", target, source)
            return target
        log.info("%s: %s may have changed since an earlier run fetched it; fetching it again", target, source)
        target.unlink()
    record_path.unlink(missing_ok=True)
    version = fetch(source, target, checksum, **options)
    record_path.write_text(json.dumps(version), encoding="utf-8")
    return target


def is_current(source: str, target: Path, checksum: str | None, record: dict, options: dict) -> bool:
    """Whether `target`, fetched earlier with `record` (from fetch), is provably what fetching
    `source` now would give."""
    if record.get("source") != source or record.get("size") != target.stat().st_size:
        return False
    if checksum:  # the bytes were verified against it; the same expected sum means the same file
        algorithm, digest = expected_checksum(source, checksum, **options)
        return record.get("checksum") == f"{algorithm}:{digest}"
    if not is_url(source):  # (the SHA-256 of the copy is checked against the sources' manifest)
        return record.get("stat") == local_version(local_path(source)) and "sha256" in record
    return unchanged_on_server(source, record, **options)


def download_many(
    sources: Sequence[str | Path],
    dest_dir: str | Path,
    checksums: Sequence[str | None] | None = None,
    *,
    rules: Rules = STRICT,
    **options,
) -> list[Path]:
    """Fetch every source into `dest_dir`, named after the URL's (or path's) file name.

    A local directory source contributes its files (not sub-folders, not hidden files), sorted by
    name, once it passes its walk under `rules` (bert.source_tree). Two sources with the same file
    name are an error. Files go through `download_staged`, so a re-run after a failure into the same
    (staging) folder fetches only what is missing or changed. `options` go to `download_staged`.
    Returns the paths, in source order.
    """
    return [
        download_staged(item, Path(dest_dir) / name, checksum, **options)
        for item, name, checksum in _plan(sources, checksums, rules)
    ]


def _plan(
    sources: Sequence[str | Path], checksums: Sequence[str | None] | None, rules: Rules
) -> list[tuple[str, str, str | None]]:
    """(source file, file name, checksum) for every file the sources stand for (see download_many)."""
    checksums = list(checksums or [None] * len(sources))
    if len(checksums) != len(sources):
        raise UserError(
            f"{len(sources)} sources but {len(checksums)} checksums; give one checksum per source or none"
        )
    plan: dict[str, tuple[str, str | None]] = {}
    for source, checksum in zip(sources, checksums):
        for item, name in expand(str(source), checksum, rules):
            if name in plan:
                raise UserError(
                    f"two sources have the same file name {name!r}: {plan[name][0]} and {item}; "
                    "rename one of them (files from all sources land in one folder)"
                )
            plan[name] = (item, checksum)
    return [(item, name, checksum) for name, (item, checksum) in plan.items()]


# --- the staging area of a download stage --------------------------------------------------------


class Staging:
    """A download stage's staging folder (`staged`), and where each file in it came from, so that
    every message names the source as the user wrote it (a URL or path in params.yaml, plus the
    member of an archive), never the staging copy, which is gone by the time they read it. Local
    sources are checked against the stage's `manifest` (bert.download.manifest) when it has one."""

    def __init__(self, folder: Path, out_dir: Path, rules: Rules, manifest: Manifest | None):
        self.folder, self.out_dir, self.rules, self.manifest = folder, out_dir, rules, manifest
        self.origins: dict[Path, str] = {}

    def walk(self, source: str) -> SourceTree | None:
        """The local source `source` walked under the stage's rules (bert.source_tree), holding the
        files its manifest lists (a folder is checked whole, as the `sources` stage hashed it whole).
        None for a URL."""
        path = local_path(source)
        if path is None:
            return None
        tree = walk_source(source, path, self.rules)
        if self.manifest is not None:
            self.manifest.check_tree(tree)
        return tree

    def fetch(self, source: str, name: str, checksum: str | None = None) -> Path:
        """`source` as `name` in the staging folder (download_staged), checked to be what its name
        says (not an HTML page in place of a zip, JSON or weights file: bert.inputs.check_content).
        A local source must be a regular file, by its walk."""
        tree = self.walk(source)
        if tree is not None and tree.is_folder:
            raise UserError(f"{source}: a folder, not a file; point params.yaml at the file")
        target = self.folder / name
        self.origins[target] = str(source)
        download_staged(source, target, checksum)
        if tree is not None and self.manifest is not None:
            self._check_listed(source, target)
        self._check_content(target)
        return target

    def fetch_many(
        self, sources: Sequence[str], checksums: Sequence[str | None] | None = None, into: str = ""
    ) -> list[Path]:
        """Every file of `sources` (see download_many) under `into` in the staging folder."""
        for source in sources:
            self.walk(source)  # a folder holds the files its manifest lists
        return [
            self.fetch(item, str(Path(into) / name) if into else name, checksum)
            for item, name, checksum in _plan(sources, checksums, self.rules)
        ]

    def came_from(self, path: Path, origin: str) -> None:
        """Record that staged `path` (say, unpacked from an archive) stands for `origin` in messages."""
        self.origins[path] = origin

    def origin(self, path: Path) -> str:
        return self.origins.get(path, str(path))

    def discard(self, path: Path) -> None:
        """Remove a staged file that failed its check, so the re-run fetches the fixed source."""
        path.unlink(missing_ok=True)
        path.with_name(f".{path.name}.source.json").unlink(missing_ok=True)

    def as_written(self, message: str) -> str:
        """`message` with every staged path replaced by the source it stands for, and the staging
        folder itself (should a message name it) by the output it is staging."""
        replacements = {str(self.folder): str(self.out_dir), str(self.folder.resolve()): str(self.out_dir)}
        for path, origin in self.origins.items():
            replacements[str(path)] = replacements[str(path.resolve())] = origin
        for staged_path in sorted(replacements, key=len, reverse=True):
            message = message.replace(staged_path, replacements[staged_path])
        return message

    def publish(self, files: Mapping[str, Path]) -> None:
        """Move `files` ({name in the output: staged path}) into the output folder, as one folder
        (publish), and delete the staging folder."""
        publish(files, self.out_dir)
        remove_staging(self.folder)

    def _check_listed(self, source: str, target: Path) -> None:
        """The bytes copied from `source` (their SHA-256, in the record download_staged keeps) are
        the ones its manifest lists."""
        record = read_meta(target.with_name(f".{target.name}.source.json"))
        try:
            self.manifest.check_file(source, record.get("size"), record.get("sha256"))
        except UserError:
            self.discard(target)
            raise

    def publish_beside(self, files: Mapping[str, Path]) -> None:
        """Move `files` ({name in the output: staged path}) into the output folder one by one, beside
        what else it holds (a committed README), as each file is an output of its own; then delete
        the staging folder. Each lands whole (one rename); a stage killed between two is not done,
        and DVC runs it again."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for name, path in files.items():
            os.replace(path, self.out_dir / name)
        remove_staging(self.folder)

    def _check_content(self, target: Path) -> None:
        try:
            check_content(target, self.origins[target])
        except UserError:
            self.discard(target)  # the re-run fetches it again rather than reuse the bad copy
            raise


@contextmanager
def staged(
    out_dir: str | Path, sources: object, rules: Rules, manifest: Manifest | None = None
) -> Iterator[Staging]:
    """The staging area of a download stage that publishes `out_dir`: files collect in
    `staging_dir(out_dir, sources)` (kept across failed runs, so a re-run resumes), the stage reads
    and checks them there, then calls `Staging.publish`. Local sources are walked under `rules`
    (bert.source_tree) and checked against `manifest` when given. A UserError raised inside names
    the sources as written, not their staging copies."""
    staging = Staging(staging_dir(out_dir, sources), Path(out_dir), rules, manifest)
    try:
        yield staging
    except UserError as error:
        raise type(error)(staging.as_written(str(error))) from None


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
