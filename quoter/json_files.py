"""Reading a JSON settings file, with errors that name the file (and the line of a syntax error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from quoter.errors import InputError


def read_json_file(path: Path, missing: str) -> Any:
    """The JSON value in `path`; a missing file is an InputError saying `missing`, invalid JSON one naming
    the line."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(missing, path=path) from None
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON: {error.msg}", path=path, line=error.lineno) from None
