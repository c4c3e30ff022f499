"""Reading UTF-8 text files line by line, with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quoter.errors import InputError


def decoded_lines(path: Path, kind: str = "file") -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text without its line end) of a UTF-8 file, streamed; a byte-order mark
    is dropped, undecodable bytes are located by line. `kind` names the file in errors ("data file")."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputError(f"{kind} not found", path=path) from None
    except OSError as error:
        raise InputError(f"cannot read {kind}: {error.strerror}", path=path) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"bytes at column {error.start + 1} are not valid UTF-8", path=path, line=number
                ) from None
            yield number, text.rstrip("\r\n")


def json_object(text: str, path: Path, line: int, expected: str) -> dict[str, Any]:
    """The JSON object on one line of a JSON lines file; invalid JSON is an InputError at path:line with the
    parser's complaint, any other JSON value one that says what was `expected`."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error.msg}", path=path, line=line) from None
    if not isinstance(item, dict):
        raise InputError(f"expected {expected}", path=path, line=line)
    return item


def check_text(value: str, path: Path, line: int, field: str) -> str:
    """`value`, refused when it holds a lone surrogate: JSON can escape one ("\\ud800"), but it is no
    character, and neither UTF-8 nor a tokenizer takes it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        message = f"character {error.start + 1} is a lone surrogate (U+{ord(value[error.start]):04X}), not text"
        raise InputError(message, path=path, line=line, field=field) from None
    return value
