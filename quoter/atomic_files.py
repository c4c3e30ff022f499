"""Write files and folders so that a crash or a full disk never leaves a half-written output behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder, then rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write `data` as indented UTF-8 JSON, atomically."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


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
    complete."""
    building = _temporary_sibling(target, "tmp")
    try:
        build(building)
        if target.exists():
            old = _temporary_sibling(target, "old")
            target.rename(old / target.name)
            building.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            building.rename(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
