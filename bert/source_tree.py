"""A local source: a regular file, or a folder of them, walked and checked before anything hashes,
copies or reads it. The one walker of a user's files (the `sources` stage's manifests, the download
stages' copies, the corpus readers' folders).

Everything below a source folder is looked at, sub-folders and hidden files included, because the
`sources` stage hashes all of it into its manifest (bert.download.manifest), and an entry that cannot
be read to its end would hang it (a FIFO waits for a writer that never comes, a device never ends)
or stop it with a raw error (a link that leads nowhere). So each entry must be

- a regular file, or a folder (walked; a folder is never entered through a link, so the walk ends);
- a symbolic link to a regular file inside the source folder, or anywhere when the caller allows
  it (`Rules.follow_links`, params.yaml's follow_links): otherwise a link to /etc/passwd in a corpus
  folder would be copied into data/raw unseen;
- a symbolic link to a folder: skipped, and named (`SourceTree.skipped`): a walk that entered linked
  folders could loop, or leave the folder unseen;

and anything else is refused with one line naming the entry and the fix: FIFOs, sockets, devices,
links that dangle or loop, links leaving the folder without follow_links. A source also may not lie
in, or hold, a folder the pipeline writes (`Rules.reserved`): a dependency on a pipeline output is
one DVC's graph cannot see.

The walk only stats (lstat, stat, realpath): that never blocks on a FIFO nor reads a device.
`open_regular` is the guard of the reads that follow, for a file swapped after its walk.
"""

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from bert.errors import UserError

log = logging.getLogger(__name__)

SPECIAL_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
FOLLOW_LINKS_FIX = "or set follow_links: true in params.yaml to follow links that leave a source folder"


class SourceNotFound(UserError):
    """The source does not exist: a local path that is not there (or, raised by the downloader, a URL
    that answers 404/410)."""


@dataclass(frozen=True)
class Rules:
    """What a source may be beyond regular files and folders, and where it may not be."""

    follow_links: bool  # links leaving a source folder are followed (else refused)
    reserved: tuple[Path, ...] = ()  # folders the pipeline writes: no source lies in or holds one
    bundled: tuple[Path, ...] = ()  # folders inside `reserved` that hold sources (the bundled sample)


# For a caller with no params behind it (a library user's folder, the pipeline's own copies): no
# link leaves a folder, and any place is allowed.
STRICT = Rules(follow_links=False)


@dataclass(frozen=True)
class SourceTree:
    """A checked local source: a file, or a folder and the regular files below it."""

    source: str  # as the user wrote it (a path or a file:// URL), for messages
    path: Path
    is_folder: bool
    # A folder's regular files and links to them: POSIX paths relative to it, sorted.
    files: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # a folder's links to folders, not followed

    def file_paths(self) -> list[Path]:
        """The regular files of the source: the file itself, or every one below the folder."""
        return [self.path / name for name in self.files] if self.is_folder else [self.path]

    def top_level(self) -> tuple[list[Path], list[str]]:
        """A folder's files that are not hidden and not in a sub-folder (what a download copies),
        and the names of the other files it holds (a sub-folder as `name/`, with its file count; the
        links to folders are `skipped`)."""
        files, left_out, below = [], [], {}
        for name in self.files:
            folder, _, rest = name.partition("/")
            if rest:
                below[folder] = below.get(folder, 0) + 1
            elif name.startswith("."):
                left_out.append(name)
            else:
                files.append(self.path / name)
        left_out += [f"{folder}/ ({count} file{'s' * (count > 1)})" for folder, count in below.items()]
        return files, sorted(left_out)


def walk_source(source: str, path: Path, rules: Rules, param: str = "") -> SourceTree:
    """Check the local source `source` (at `path`) as the module docstring says, or raise one
    UserError naming it (after `param`, the params.yaml key that lists it, when given)."""
    prefix = f"{param}: " if param else ""
    shown = printable(source)
    try:
        info = os.stat(path)  # through a link: the user may name a link to their files
    except OSError as error:
        raise _unreachable_error(f"{prefix}{shown}", path, error, "check the path in params.yaml") from None
    real = Path(os.path.realpath(path))
    _check_not_reserved(real, f"{prefix}{shown}", rules)
    if stat.S_ISREG(info.st_mode):
        return SourceTree(source, path, is_folder=False)
    if not stat.S_ISDIR(info.st_mode):
        raise UserError(
            f"{prefix}{shown} is {_kind(info.st_mode)}, not a file or folder; a source is a regular file or a "
            "folder of them: point params.yaml at those"
        )
    files, skipped = _walk(path, real, rules, lambda name: f"{prefix}{_child(source, name)}")
    if skipped:
        log.warning(
            "%s%s: not followed, as links to folders never are: %s (give such a "
            "folder as a source of its own, or link its files)",
            prefix,
            shown,
            ", ".join(printable(name) for name in skipped),
        )
    return SourceTree(source, path, is_folder=True, files=tuple(files), skipped=tuple(skipped))


def _walk(root: Path, real_root: Path, rules: Rules, shown) -> tuple[list[str], list[str]]:
    """The regular files and the skipped links to folders below `root` (relative POSIX paths, sorted),
    or a UserError naming (through `shown`) the first entry that breaks the rules."""
    files, skipped, folders = [], [], [""]
    while folders:
        relative = folders.pop()
        try:
            entries = sorted(os.scandir(root / relative), key=lambda entry: entry.name)
        except OSError as error:
            raise UserError(f"{shown(relative)} cannot be listed ({error.strerror})") from None
        for entry in entries:
            name = f"{relative}/{entry.name}" if relative else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as error:  # removed since the listing, say
                raise UserError(f"{shown(name)} cannot be read ({error.strerror})") from None
            if stat.S_ISDIR(mode):
                folders.append(name)
            elif stat.S_ISREG(mode):
                files.append(name)
            elif stat.S_ISLNK(mode):
                leads_to_a_file = _link_leads_to_a_file(Path(entry.path), real_root, rules, shown(name))
                (files if leads_to_a_file else skipped).append(name)
            else:
                raise UserError(
                    f"{shown(name)} is {_kind(mode)}; a source folder holds regular files and folders only "
                    "(reading it could hang or fail): remove it"
                )
    return sorted(files, key=_path_order), sorted(skipped, key=_path_order)


def _path_order(name: str) -> list[str]:
    """The order in which Path objects sort (part by part: a/b before a-c), which readers kept."""
    return name.split("/")


def _link_leads_to_a_file(link: Path, real_root: Path, rules: Rules, shown: str) -> bool:
    """Whether the link `link` in a source folder leads to a regular file (True) or a folder (False);
    a UserError when it leads nowhere, to something else, or out of the folder against the rules."""
    try:
        info = os.stat(link)
    except OSError as error:
        raise _unreachable_error(shown, link, error, "remove the link or point it at a file") from None
    target = Path(os.path.realpath(link))
    written = printable(os.readlink(link))  # the link as the user made it: messages name what they wrote
    if not _within(target, real_root) and not rules.follow_links:
        raise UserError(
            f"{shown} is a symbolic link to {written}, outside the source folder; remove it (or copy what it "
            f"leads to into the folder), {FOLLOW_LINKS_FIX}"
        )
    _check_not_reserved(target, f"{shown} (a link to {written})", rules)
    if stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return stat.S_ISREG(info.st_mode)
    raise UserError(
        f"{shown} is a symbolic link to {_kind(info.st_mode)}; remove it (reading it could hang or fail)"
    )


def _check_not_reserved(real: Path, shown: str, rules: Rules) -> None:
    """A UserError if the real path `real` lies in, is, or holds a folder the pipeline writes."""
    if any(_within(real, Path(os.path.realpath(folder))) for folder in rules.bundled):
        return
    for folder in rules.reserved:
        real_folder = Path(os.path.realpath(folder))
        if real == real_folder:
            where = "is"
        elif _within(real, real_folder):
            where = "lies in"
        elif _within(real_folder, real):
            where = "holds"
        else:
            continue
        raise UserError(
            f"{shown} {where} {folder}/, where the pipeline writes its outputs: DVC cannot see a dependency "
            f"on them; point params.yaml at the original files, outside {folder}/"
        )


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _unreachable_error(shown: str, path: Path, error: OSError, fix: str) -> UserError:
    """The error for `path`, which stat or open could not follow: SourceNotFound when nothing is there
    (a caller may try another file then: download_weights), else a UserError saying what is."""
    problem = _unreachable(path, error)
    kind = SourceNotFound if problem == "does not exist" else UserError
    return kind(f"{shown} {problem}; {fix}")


def _unreachable(path: Path, error: OSError) -> str:
    """What stands in the way of `path`, which stat could not follow."""
    if error.errno == errno.ELOOP:
        return "is a symbolic link loop"
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.islink(path):
            return f"is a symbolic link to {printable(os.readlink(path))}, which does not exist"
        return "does not exist"
    if isinstance(error, PermissionError):
        return "is not readable (permission denied)"
    return f"cannot be read ({error.strerror})"


def open_regular(path: Path, shown: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file, else one UserError naming `shown`. Opening
    does not wait for a FIFO's writer (O_NONBLOCK), and the check is of what was opened, so a file
    swapped for a FIFO or a device after its walk is refused too, never read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise _unreachable_error(printable(shown), path, error, "check the path") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise UserError(f"{printable(shown)} is {_kind(mode)}, not a regular file; give a file")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    return SPECIAL_KINDS.get(stat.S_IFMT(mode), "a special file")


def _child(source: str, name: str) -> str:
    """An entry of the source folder `source` as the user would write it (`name`: relative to it)."""
    return printable(f"{source.rstrip('/')}/{name}" if name else source)


def printable(text: str) -> str:
    """`text` as a message shows it: as is, or quoted with escapes when it holds a line break or
    another control character, so that the message stays one line."""
    return text if text.isprintable() else repr(text)
