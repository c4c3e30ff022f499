"""Reading UTF-8 text files line by line, with errors that name the file and line."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
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
    parser's complaint, any other JSON value one that says what was `expected`. So are values Python cannot
    take in: arrays or objects nested more than MAX_NESTING deep, and integers longer than Python converts
    (sys.get_int_max_str_digits), these with the field that holds them."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"not valid JSON: {error.msg}", path=path, line=line) from None
    except RecursionError:  # nested too deeply for the parser itself
        raise _too_deep(path, line) from None
    except ValueError:  # the one other complaint of the parser: an integer too long to convert
        raise _too_long_integer(text, path, line) from None
    if _brackets(text) > MAX_NESTING and _nesting(item) > MAX_NESTING:
        raise _too_deep(path, line)
    if not isinstance(item, dict):
        raise InputError(f"expected {expected}", path=path, line=line)
    return item


# Far deeper than any record Quoter reads, and far below the recursion limit, under which writing such a
# value back (json.dumps of a batch context's id) must also stay.
MAX_NESTING = 100


def _too_deep(path: Path, line: int) -> InputError:
    return InputError(f"JSON nested more than {MAX_NESTING} levels deep", path=path, line=line)


@dataclass(frozen=True)
class OverlongInteger:
    """Read in place of a JSON integer with more digits than Python converts (sys.get_int_max_str_digits(), a
    guard against quadratic-time conversions), so that the field holding it can be named: no field takes it."""

    digits: int


def read_integer(digits: str) -> int | OverlongInteger:
    """json.loads's `parse_int`: the integer, or an OverlongInteger where Python will not convert it."""
    try:
        return int(digits)
    except ValueError:  # too many digits: the only way the JSON scanner's digits fail
        return OverlongInteger(len(digits.lstrip("-")))


def _too_long_integer(text: str, path: Path, line: int) -> InputError:
    """The error for a line holding an integer too long for Python, naming the field it is in: the line is
    parsed again with such integers read as OverlongInteger, then the first of them is looked for."""
    try:
        item = json.loads(text, parse_int=read_integer)
    except RecursionError:  # nested too deeply after the integer, where the first parse stopped
        return _too_deep(path, line)
    field, overlong = _first_overlong(item)
    message = f"an integer of {overlong.digits:,} digits; Python reads at most {sys.get_int_max_str_digits():,}"
    return InputError(message, path=path, line=line, field=field)


def _brackets(text: str) -> int:
    """An upper bound of the nesting of a JSON text, cheap enough to spare most lines the exact count."""
    return text.count("[") + text.count("{")


def _children(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    return value if isinstance(value, list) else []


def _nesting(value: Any) -> int:
    """How deeply arrays and objects are nested in a parsed JSON value (counted without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in _children(node))
    return deepest


def _first_overlong(item: Any) -> tuple[str | None, OverlongInteger]:
    """The first OverlongInteger in a parsed JSON value, with the key of the top-level field that holds it
    (None when the value is no object)."""
    fields = list(item.items()) if isinstance(item, dict) else [(None, item)]
    for key, value in fields:
        stack = [value]
        while stack:
            node = stack.pop()
            if isinstance(node, OverlongInteger):
                return (None if key is None else str(key)), node
            stack.extend(_children(node))
    raise ValueError("no overlong integer in the value")


def check_text(value: str, path: Path, line: int, field: str) -> str:
    """`value`, refused when it holds a lone surrogate: JSON can escape one ("\\ud800"), but it is no
    character, and neither UTF-8 nor a tokenizer takes it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        message = f"character {error.start + 1} is a lone surrogate (U+{ord(value[error.start]):04X}), not text"
        raise InputError(message, path=path, line=line, field=field) from None
    return value
