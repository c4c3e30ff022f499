"""Settings as typed dataclasses with one default each, read from YAML files plus dotted overrides.

Every command with settings (train, serve, batch, evaluate) reads them the same way: the dataclass's
defaults, then a YAML file (which may build on another with `base: FILE`, relative to it), then `--set
section.key=value` overrides (values are YAML scalars), then the command's own options. A bad key or value
is a one-line QuoterError that names the key (`joint.epochs: expected an integer, got 'x'`; an unknown key
lists the known ones), so the command line never shows a traceback for a typo in a config file."""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import yaml

from quoter.errors import QuoterError

Settings = TypeVar("Settings")

# A config file's key that names the config file it builds on.
BASE_KEY = "base"
# The metadata key of a settings field's help (see `setting`).
HELP_KEY = "help"


def load_settings(
    cls: type[Settings],
    path: str | Path | None,
    overrides: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> Settings:
    """The settings `cls` from a YAML file (None: all defaults) and overrides; see read_settings."""
    return build(cls, read_settings(path, overrides, values))


def read_settings(
    path: str | Path | None, overrides: dict[str, str] | None = None, values: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The nested settings of a YAML file (None: none) over the files it builds on (`base: FILE`, relative to
    it), then dotted overrides {"joint.epochs": "2"} whose values are parsed as YAML scalars, then dotted
    `values` taken as they are (the values of command-line options)."""
    data: dict[str, Any] = {}
    if path is not None:
        data = _read_config_file(Path(path), ())
    for key, text in (overrides or {}).items():
        set_dotted(data, key, _parse_scalar(key, text))
    for key, value in (values or {}).items():
        set_dotted(data, key, value)
    return data


def parse_assignments(assignments: list[str], example: str = "section.key=value") -> dict[str, str]:
    """`key=value` strings from the command line as a dict; a string without '=' is an error."""
    parsed = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise QuoterError(f"expected key=value (e.g. {example}), got '{assignment}'")
        parsed[key.strip()] = value
    return parsed


def _read_config_file(path: Path, including: tuple[Path, ...]) -> dict[str, Any]:
    """A config file's settings over those of its `base` (a config file named relative to it), if it has
    one; `including` are the files that led here, so that a loop of bases is an error, not a hang."""
    data = _read_yaml(path)
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str) or not base.strip():
        raise QuoterError(f"{path}: {BASE_KEY}: expected the path of another config file, got {base!r}")
    if path.resolve() in including:
        raise QuoterError(f"{path}: {BASE_KEY}: the config files name each other as their base")
    return _merged(_read_config_file(path.parent / base, (*including, path.resolve())), data)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over`'s settings in place of its own, section by section."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = _merged(merged[key], value)
        merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QuoterError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise QuoterError(f"{path}: is a folder, not a config file") from None
    except UnicodeDecodeError:
        raise QuoterError(f"{path}: a config file must be UTF-8 text") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise QuoterError(f"{path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise QuoterError(f"{path}: a config file must be a mapping of sections")
    return data


def _parse_scalar(key: str, text: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
        raise QuoterError(f"{key}: cannot read the value '{text}'") from None


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set `key` ("section.name") in nested settings, making its sections as needed."""
    *sections, last = key.split(".")
    target = data
    for section in sections:
        child = target.setdefault(section, {})
        if not isinstance(child, dict):
            raise QuoterError(f"{key}: '{section}' is a setting, not a section")
        target = child
    target[last] = value


def build(cls: type[Settings], data: Any, prefix: str = "") -> Settings:
    """An instance of dataclass `cls` from a mapping, each value checked against the field's type."""
    if not isinstance(data, dict):
        raise QuoterError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [key for key in data if key not in names]
    if unknown:
        raise QuoterError(f"{prefix}{unknown[0]}: unknown setting; known in this section: {', '.join(names)}")
    values = {key: _convert(hints[key], value, prefix + key) for key, value in data.items()}
    try:
        return cls(**values)
    except QuoterError as error:
        raise QuoterError(f"{prefix}{error}") from None


def _convert(hint: Any, value: Any, key: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return build(hint, value if value is not None else {}, key + ".")
    options = (
        typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union else ()
    )
    if options:
        if value is None and type(None) in options:
            return None
        (hint,) = [option for option in options if option is not type(None)]
    if typing.get_origin(hint) is dict:
        if not isinstance(value, dict):
            raise QuoterError(f"{key}: expected a mapping, got {value!r}")
        name_hint, item = typing.get_args(hint)
        return {
            _convert(name_hint, name, key): _convert(item, element, f"{key}.{name}") for name, element in value.items()
        }
    if typing.get_origin(hint) in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise QuoterError(f"{key}: expected a list, got {value!r}")
        item = typing.get_args(hint)[0]
        items = [_convert(item, element, f"{key}[{number}]") for number, element in enumerate(value)]
        return typing.get_origin(hint)(items)
    if isinstance(hint, type) and issubclass(hint, Enum):
        allowed = [member.value for member in hint]
        if value not in allowed:
            raise QuoterError(f"{key}: expected one of {', '.join(map(str, allowed))}, got {value!r}")
        return hint(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise QuoterError(f"{key}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise QuoterError(f"{key}: expected an integer, got {value!r}")
        return value
    if hint is float:
        # YAML 1.1 reads 5e-5 (no dot) as a string, so numeric strings are numbers here.
        try:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        except (TypeError, ValueError):
            raise QuoterError(f"{key}: expected a number, got {value!r}") from None
    if isinstance(value, (dict, list)) or value is None:
        raise QuoterError(f"{key}: expected a string, got {value!r}")
    return str(value)


def config_to_dict(settings: Any) -> dict[str, Any]:
    """The settings as plain JSON-able values (enums by value, tuples as lists, mappings copied), e.g. for a
    bundle's info."""
    result = {}
    for item in dataclasses.fields(settings):
        value = getattr(settings, item.name)
        if dataclasses.is_dataclass(value):
            value = config_to_dict(value)
        elif isinstance(value, Enum):
            value = value.value
        elif isinstance(value, tuple):
            value = [element.value if isinstance(element, Enum) else element for element in value]
        elif isinstance(value, dict):
            value = dict(value)
        result[item.name] = value
    return result


def at_least(name: str, value: int | float, low: int | float) -> None:
    """A setting's lower bound, as the one-line error of a dataclass's __post_init__."""
    if value < low:
        raise QuoterError(f"{name}: must be at least {low}, got {value}")


def at_most(name: str, value: int | float, high: int | float) -> None:
    """A setting's upper bound, as the one-line error of a dataclass's __post_init__."""
    if value > high:
        raise QuoterError(f"{name}: must be at most {high}, got {value}")


def setting(default: Any, help: str) -> Any:
    """A settings field with its one default and its help, which the command-line option made from it shows
    (quoter.cli.options); the dataclass field carries it as metadata."""
    return dataclasses.field(default=default, metadata={HELP_KEY: help})
