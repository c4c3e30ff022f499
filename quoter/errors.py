"""Errors a user can fix: the command line prints them as one clear line, never a traceback."""

from __future__ import annotations

from pathlib import Path


class QuoterError(Exception):
    """Base class of every error caused by input, settings or the environment rather than a bug."""


class InputError(QuoterError):
    """Bad input, located as precisely as possible: file, line (1-based) and field."""

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path or ""
        if self.line is not None:
            where += f":{self.line}" if where else f"line {self.line}"
        if self.field is not None:
            where += f" (field '{self.field}')" if where else f"field '{self.field}'"
        return f"{where}: {self.message}" if where else self.message
