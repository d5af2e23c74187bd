"""Outputs that are complete or absent: the one way every stage, tool and `save_pretrained` write a
file or a folder, so a failed, killed or disk-full run never leaves half-written output behind.

Temporary names are `.<output name>.tmp-<pid>@<host>-<random>` beside the output. Every write
sweeps the temporaries of dead processes of this host from the folder it writes into: a killed
stage that DVC later restores from its run cache never runs again, so its own cleanup alone would
leave them there for good. Another host's temporaries (Dask workers writing into a shared folder)
are never touched: whether their process lives cannot be told from here. A temporary still inside
the folder of atomic_folder when its block ends is of a task that died and ran again (its writers
are done): it is removed, not published.
"""

import contextlib
import json
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bert.errors import UserError, is_disk_full, shown_path, unwritable_line


@contextlib.contextmanager
def atomic_folder(out_dir: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder next to `out_dir`; on success it replaces `out_dir`.

    On any error the temporary folder is removed and an existing `out_dir` is left untouched, so
    a failed or interrupted stage never leaves half-written output behind.
    """
    out_dir = Path(out_dir)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        _clear_interrupted(out_dir)
        _sweep_dead_temporaries(out_dir.parent)
        tmp_dir = Path(tempfile.mkdtemp(prefix=_temporary_prefix(out_dir.name), dir=out_dir.parent))
    except OSError as error:
        raise UserError(
            unwritable_line(error)
            or f"{out_dir}: cannot write the output folder ({error.strerror}: {_shown(error)}); "
            "check that the path is a writable folder"
        ) from None
    try:
        yield tmp_dir
        _remove_temporaries(tmp_dir)
        _make_ordinary(tmp_dir)
        old = None
        if out_dir.exists():
            old = out_dir.parent / f".{out_dir.name}.old-{os.getpid()}"
            os.replace(out_dir, old)
        os.replace(tmp_dir, out_dir)
        if old is not None:
            shutil.rmtree(old)
    except Exception as error:
        if isinstance(error, UserError) or not is_disk_full(error):
            raise
        raise _disk_full_error(out_dir, error) from None
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _clear_interrupted(out_dir: Path) -> None:
    """Clean up after a run of atomic_folder that was killed: remove its temporary folder and put
    back the previous output if it was killed between moving that aside and renaming the new one."""
    for old in sorted(out_dir.parent.glob(f".{out_dir.name}.old-*")):
        if out_dir.exists():
            shutil.rmtree(old)
        else:
            os.replace(old, out_dir)
    for tmp in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        shutil.rmtree(tmp)


HOST = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"
# names without a host predate it: this host's
TEMPORARY_NAME = re.compile(
    r"\.(?P<name>.+)\.(?:tmp-(?P<pid>\d+)(?:@(?P<host>[A-Za-z0-9._-]+?))?-[a-z0-9_]+|old-(?P<old_pid>\d+))"
)


def _temporary_prefix(name: str) -> str:
    return f".{name}.tmp-{os.getpid()}@{HOST}-"


def temporary_file(path: Path) -> Path:
    """A new empty file beside `path`, named as a temporary of this process and with ordinary
    permissions, for a writer that renames it onto `path` itself (os.replace) once it is complete:
    the tasks of a stage writing their parts into the folder of atomic_folder. Unlike atomic_file
    it does not sweep the folder (thousands of tasks write into one) and leaves the wording of
    errors to the stage."""
    fd, name = tempfile.mkstemp(prefix=_temporary_prefix(path.name), dir=path.parent)
    os.close(fd)
    _make_ordinary(Path(name))
    return Path(name)


@contextlib.contextmanager
def task_file(path: Path) -> Iterator[Path]:
    """temporary_file for a writer in a `with` block: renamed onto `path` when the block ends
    well, removed when it fails, so a task run again replaces a dead run's file whole."""
    building = temporary_file(path)
    try:
        yield building
        os.replace(building, path)
    finally:
        building.unlink(missing_ok=True)


def _remove_temporaries(folder: Path) -> None:
    """Remove the temporaries left in a finished output folder, whatever their process or host: its
    writers are done, so these are of tasks that died and ran again (Dask retries a task elsewhere)."""
    for entry in os.scandir(folder):
        match = TEMPORARY_NAME.fullmatch(entry.name)
        if match and match["pid"]:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _sweep_dead_temporaries(folder: Path) -> None:
    """Remove the temporaries (and moved-aside old outputs whose new output is in place) that
    processes no longer alive on this machine left in `folder`. Those of live processes (pool workers
    writing beside each other, another run) are theirs to finish."""
    for entry in os.scandir(folder):
        match = TEMPORARY_NAME.fullmatch(entry.name)
        if not match or match["host"] not in (None, HOST) or _is_alive(int(match["pid"] or match["old_pid"])):
            continue
        if match["old_pid"] and not (folder / match["name"]).exists():
            continue  # atomic_folder of that output puts it back (_clear_interrupted)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            Path(entry.path).unlink(missing_ok=True)


def _is_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _make_ordinary(output: Path) -> None:
    """Give a file, or a folder and everything in it, the permissions of ordinary files and folders
    under the umask (0755 / 0644 usually): mkdtemp and mkstemp make 0700 / 0600 and some writers
    (safetensors' save_file) make their files 0600, which other users of the output could not read."""
    umask = _umask()
    paths = [str(output)] + [
        os.path.join(root, name) for root, dirs, files in os.walk(output) for name in dirs + files
    ]
    for path in paths:
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and mode & 0o111):
            os.chmod(path, 0o777 & ~umask)
        elif stat.S_ISREG(mode):
            os.chmod(path, 0o666 & ~umask)


def _shown(error: OSError) -> str:
    """The path an OSError names, without the temporary name of this module inside it."""
    return shown_path(error.filename) if isinstance(error.filename, str) else str(error.filename)


def _disk_full_error(output: Path, error: BaseException) -> UserError:
    return UserError(
        f"{output}: disk full while writing it ({error}); the previous {output.name} is untouched. "
        f"Free space on {output.parent.resolve()} and run the stage again"
    )


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to `path` for any writer (open, h5py, pyarrow, torch.save,
    safetensors); on success it replaces `path` with ordinary permissions (0644 under the usual
    umask, not mkstemp's 0600). On any error it is removed and an existing `path` is untouched."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _sweep_dead_temporaries(path.parent)
        fd, tmp_name = tempfile.mkstemp(prefix=_temporary_prefix(path.name), dir=path.parent)
        os.close(fd)
    except OSError as error:
        raise UserError(
            unwritable_line(error)
            or f"{path}: cannot write the file ({error.strerror}: {_shown(error)}); check that its folder is writable"
        ) from None
    tmp = Path(tmp_name)
    try:
        yield tmp
        _make_ordinary(tmp)
        os.replace(tmp, path)
    except Exception as error:
        if isinstance(error, UserError) or not is_disk_full(error):
            raise
        raise _disk_full_error(path, error) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, data: object) -> None:
    """Write `data` as indented UTF-8 JSON with a final newline, atomically (metrics, predictions)."""
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8") as file:
        json.dump(data, file, indent=2, ensure_ascii=False)
        file.write("\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
