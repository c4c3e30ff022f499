"""Settings saved as JSON, derived from their dataclass's fields in both directions (as sentence-transformers
derives a module's saved config from its `config_keys`), so that what is written and what is read cannot drift
apart. Reading checks each value against its field's type with the loader of every command's settings
(quoter.settings): a bad saved setting is one line naming the file and the field."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

from quoter.errors import InputError, QuoterError
from quoter.settings import build, config_to_dict

Config = TypeVar("Config")


def to_json(config: Any) -> dict[str, Any]:
    """The fields of dataclass `config` as JSON values: enums by value, tuples as lists, nested dataclasses as
    objects."""
    return config_to_dict(config)


def from_json(
    cls: type[Config], data: Any, path: str | Path | None, field: str = "", beside: Collection[str] = ()
) -> Config:
    """The dataclass `cls` from `to_json`'s output `data`, read from the file `path`; `field` names where
    `data` sits in that file (e.g. 'fusion'), and `beside` the keys the file holds next to the fields (its
    format and version), which are left out. A missing field takes its default; an unknown one or a value of
    the wrong type is a one-line InputError naming the file and the field."""
    if isinstance(data, dict):
        data = {key: value for key, value in data.items() if key not in beside}
    try:
        return build(cls, data, f"{field}." if field else "")
    except QuoterError as error:
        raise InputError(str(error), path=path) from None
