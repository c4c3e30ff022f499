"""Command-line options that several subcommands share, declared once."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Generic, Optional

import typer

from quoter.encoders.backend.runtime_config import MAX_MRR_LOSS
from quoter.settings import Settings, build, parse_assignments, read_settings

SPLITS_HELP = (
    'Splits JSON {"train": [0, a], "valid": [a, b], "test": [b, n]} of half-open line ranges. '
    "Default: NAME.splits.json or splits.json beside the data file, if there is one."
)
PART_HELP = "Official QuoteR part whose fixed splits apply: english, modern_chinese, ancient_chinese."
RUNTIME_HELP = (
    f"What runs the context encoder; auto: the fastest whose MRR, measured when it is first exported, is at most "
    f"{MAX_MRR_LOSS} below float32 torch's."
)
QUOTE_SET_HELP = "A quote set written by `quoter encode` with the bundle. Default: the bundle's own quotes."
SplitsOption = Annotated[Optional[Path], typer.Option("--splits", help=SPLITS_HELP)]
PartOption = Annotated[Optional[str], typer.Option("--part", help=PART_HELP)]


class CommandSettings(Generic[Settings]):
    """How a command reads its settings, the dataclass `cls`: its defaults, then the `--config` file, then the
    `--set` overrides, then the command's own options that name a setting (made with `option`), all through
    the one loader of quoter.settings (a bad value is a one-line QuoterError naming its key). `example` is a
    setting as --set takes it; `complete` may fill in settings whose defaults depend on others."""

    def __init__(
        self,
        cls: type[Settings],
        example: str,
        about: str,
        complete: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.cls = cls
        self.defaults = cls()
        self.example = example
        self.complete = complete
        self._keys: dict[int, str] = {}  # the options made by `option`, by identity, with their settings
        self.config_option = Annotated[
            Optional[Path],
            typer.Option(
                "--config",
                metavar="FILE.yaml",
                dir_okay=False,
                help=f"{about} Any setting by its dotted name, as --set names it; `base: FILE` builds on another "
                "config file. Precedence, lowest first: the defaults, --config, --set, the options that name a "
                "setting.",
            ),
        ]
        self.set_option = Annotated[
            Optional[list[str]],
            typer.Option(
                "--set", metavar="KEY=VALUE", help=f"Override a setting: --set {example} (repeatable; values are YAML)."
            ),
        ]

    def option(self, key: str, help: str, *flags: str, **options: Any) -> Any:
        """A command-line option that sets the setting `key`: its default is the setting's (unless `options`
        give another), and its help names the key."""
        default = options.pop("default", _value_at(self.defaults, key))
        made = typer.Option(default, *flags, help=f"{help.rstrip('.')} ({key}).", **options)
        self._keys[id(made)] = key
        return made

    def load(
        self, context: typer.Context, command: Callable[..., Any], config: Path | None, assignments: list[str] | None
    ) -> Settings:
        """The settings of a run of `command` (whose options were made by `option`)."""
        given = {}
        for name, parameter in inspect.signature(command).parameters.items():
            key = self._keys.get(id(parameter.default))
            if key is not None and _given(context, name):
                given[key] = context.params[name]
        data = read_settings(config, parse_assignments(assignments or [], self.example), given)
        if self.complete is not None:
            self.complete(data)
        return build(self.cls, data)


def _value_at(settings: Any, key: str) -> Any:
    for name in key.split("."):
        settings = getattr(settings, name)
    return settings


def _given(context: typer.Context, name: str) -> bool:
    """Whether the option was given (on the command line or in its environment variable), not defaulted. By
    name: typer may bring its own copy of click, whose ParameterSource is another class."""
    source = context.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
