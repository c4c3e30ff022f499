"""Write files and folders so that a crash or a full disk never leaves a half-written output behind."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quoter.errors import InputError


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder, then rename it into place. The
    file gets the mode a plain open gives (0666 less the umask). A write the system refuses (a full disk, a
    file size limit) is an InputError naming `path`, and leaves it as it was."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_temporary_file(path)
    except OSError as error:
        raise InputError(f"cannot write here ({error.strerror}); nothing was written", path=path) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"could not write it ({error.strerror}); it was left as it was", path=path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` as UTF-8 (line ends as given), atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write `data` as indented UTF-8 JSON, atomically."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _new_temporary_file(path: Path) -> tuple[int, str]:
    """Create an empty file beside `path`, open for writing, under a fresh name. Unlike mkstemp's 0600, its
    mode is what the umask leaves of 0666, so the file renamed into place is as readable as any other."""
    while True:
        name = str(path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp"))
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), name
        except FileExistsError:
            continue


def check_output_file(path: Path, option: str) -> None:
    """Refuse, before any work, a path given by `option` (such as "--out") where a file cannot be written: a
    folder, something there that is no regular file (a device, a pipe), or a place whose nearest existing
    folder does not take a new file (_check_creatable)."""
    if path.is_dir():
        raise InputError(f"is a folder; give {option} a file name", path=path)
    if path.exists() and not path.is_file():
        raise InputError(f"is not a regular file; give {option} a file name", path=path)
    _check_creatable(path, option)


def check_output_folder(path: Path, option: str, kind: str, foreign: Callable[[Path], list[str]]) -> None:
    """Refuse, before any work, a folder given by `option` that a command would replace with its output
    (write_folder_atomic): it may be missing, empty, or an earlier output of `kind` (such as "an earlier
    bundle"), for which `foreign(path)`, the names of the entries that belong to no such output, is empty;
    whatever else is there stays untouched. A file there, or a place where nothing can be created, is
    refused too."""
    if path.exists() and not path.is_dir():
        raise InputError(f"is not a folder; give {option} a folder name", path=path)
    if path.is_dir():
        try:
            others = foreign(path)
        except OSError as error:
            message = f"cannot read what it holds ({error.strerror}); give {option} another folder"
            raise InputError(message, path=path) from None
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            message = f"holds other files than {kind} ({shown}); give {option} a new or empty folder"
            raise InputError(message, path=path)
    _check_creatable(path, option)


def _check_creatable(path: Path, option: str) -> None:
    """Refuse a `path` where nothing can be created beside it: its nearest existing folder must take a new
    file. That is tried rather than read from the permissions, which root passes even where nothing can be
    created (/proc, /sys)."""
    folder = path.parent
    while not folder.exists():  # the folders still missing are created when the output is written
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"cannot write {option} here: {folder} is not a folder", path=path)
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        message = f"cannot write {option} here: {folder} takes no new file ({error.strerror})"
        raise InputError(message, path=path) from None


def check_not_an_input(path: Path, option: str, inputs: dict[str, Path | None]) -> None:
    """Refuse to write `path` (given by `option`) when it is one of the files the command reads, given by
    the options `inputs` (None: not given); by another path or through a link too."""
    for input_option, input_path in inputs.items():
        if input_path is not None and _same_file(path, input_path):
            raise InputError(f"{option} would overwrite the {input_option} file; give another file name", path=path)


def _same_file(first: Path, second: Path) -> bool:
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)  # hard links
    except OSError:  # one of them does not exist
        return False


FOLDER_MODE = 0o755  # mkdtemp makes 0700 folders; caches and saved encoders are meant to be shared


def _temporary_sibling(target: Path, role: str) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".{role}"))
    os.chmod(folder, FOLDER_MODE)
    return folder


def build_folder_once(target: Path, build: Callable[[Path], None]) -> Path:
    """Return `target`, first building it with `build(folder)` if it does not exist yet (a cache entry).
    When two processes build at once, the first complete folder wins and the other is discarded."""
    if target.is_dir():
        return target
    building = _temporary_sibling(target, "tmp")
    try:
        build(building)
        try:
            building.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def write_folder_atomic(target: Path, build: Callable[[Path], None]) -> None:
    """Write `target` with `build(folder)`, replacing any folder already there only once the new one is
    complete and on disk. Where the system can swap two folders in one step (Linux), a kill at any moment
    leaves the old folder or the new one; elsewhere there is a moment between two renames without either."""
    building = _temporary_sibling(target, "tmp")
    try:
        build(building)
        _fsync_tree(building)
        if not target.exists():
            building.rename(target)
        elif not _exchange(building, target):
            old = _temporary_sibling(target, "old")
            target.rename(old / target.name)
            building.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        fsync_path(target.parent)
    finally:
        # After a swap this is the old folder.
        shutil.rmtree(building, ignore_errors=True)


def fsync_path(path: Path) -> None:
    """Flush a file, or a folder's entries (new files, renames), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Flush every file and folder under `folder` to disk, so that a rename never makes a folder of
    unwritten files visible."""
    for path in [*folder.rglob("*"), folder]:
        if not path.is_symlink():
            fsync_path(path)


AT_FDCWD = -100
RENAME_EXCHANGE = 2


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step with Linux's renameat2; False where the system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system or kernel without the swap
        return False
    raise OSError(code, os.strerror(code), str(second))
