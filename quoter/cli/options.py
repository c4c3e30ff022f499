"""Command-line options that several subcommands share, and the options of a command's settings, made from the
settings dataclass itself: each setting is declared once, as a field with its default and its help."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Generic, Optional

import typer

from quoter.settings import HELP_KEY, Settings, build, parse_assignments, read_settings

SPLITS_HELP = (
    'Splits JSON {"train": [0, a], "valid": [a, b], "test": [b, n]} of half-open line ranges. '
    "Default: NAME.splits.json or splits.json beside the data file, if there is one."
)
PART_HELP = "Official QuoteR part whose fixed splits apply: english, modern_chinese, ancient_chinese."
QUOTE_SET_HELP = "A quote set written by `quoter encode` with the bundle. Default: the bundle's own quotes."
SplitsOption = Annotated[Optional[Path], typer.Option("--splits", help=SPLITS_HELP)]
PartOption = Annotated[Optional[str], typer.Option("--part", help=PART_HELP)]

# The parameters a settings command gets besides its own: typer hands over the context under this name, and
# the settings options under the dotted key with this prefix (never a name of the command's own).
CONTEXT_PARAMETER = "settings__context"
CONFIG_PARAMETER = "settings__config"
SET_PARAMETER = "settings__set"
OPTION_PREFIX = "settings__"


@dataclasses.dataclass(frozen=True)
class SettingOption:
    """The command-line option of one setting: its dotted key, the option's flag (`--name`, or `--on/--off`),
    its help (the field's), its type and its default (the setting's)."""

    key: str
    flag: str
    help: str
    hint: Any
    default: Any

    @property
    def parameter_name(self) -> str:
        return OPTION_PREFIX + self.key.replace(".", "__")

    def parameter(self) -> inspect.Parameter:
        """The option as a parameter of the command's signature, which typer reads."""
        hint, default = self.hint, self.default
        if isinstance(hint, types.UnionType):  # typer reads `X | None` as an unknown type, Optional[X] as X
            (hint,) = [option for option in typing.get_args(hint) if option is not type(None)]
            hint = Optional[hint]
        if typing.get_origin(hint) is tuple:  # a repeatable option, given or not at all
            hint, default = Optional[list[typing.get_args(hint)[0]]], None
        option = typer.Option(default, self.flag, help=f"{self.help.rstrip('.')} ({self.key}).")
        return inspect.Parameter(self.parameter_name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=hint)


class CommandSettings(Generic[Settings]):
    """How a command reads its settings, the dataclass `cls`: its defaults, then the `--config` file, then the
    `--set` overrides, then the command's options that name a setting, all through the one loader of
    quoter.settings (a bad value is a one-line QuoterError naming its key). `flags` names the settings that
    have an option of their own, by dotted key, with the option's flag (None: --the-field-name); each option's
    help is its field's (quoter.settings.setting). `example` is a setting as --set takes it; `complete` may
    fill in settings whose defaults depend on others."""

    def __init__(
        self,
        cls: type[Settings],
        example: str,
        about: str,
        flags: dict[str, str | None],
        complete: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.cls = cls
        self.example = example
        self.about = about
        self.complete = complete
        defaults = cls()
        self.options = [setting_option(defaults, key, flag) for key, flag in flags.items()]

    def command(self, function: Callable[..., None]) -> Callable[..., None]:
        """`function` as a typer command whose options are its own, then --config, --set and one per setting
        named in `flags`; it is called with its own options and `settings`, the settings of the run."""
        hints = typing.get_type_hints(function, include_extras=True)
        own = [
            parameter.replace(annotation=hints[name], kind=inspect.Parameter.KEYWORD_ONLY)
            for name, parameter in inspect.signature(function).parameters.items()
            if name != "settings"
        ]
        parameters = [*own, *self._file_parameters(), *(option.parameter() for option in self.options)]

        @functools.wraps(function)
        def run(**values: Any) -> None:
            context = values.pop(CONTEXT_PARAMETER)
            config, assignments = values.pop(CONFIG_PARAMETER), values.pop(SET_PARAMETER)
            given = {}
            for option in self.options:
                value = values.pop(option.parameter_name)
                if _given(context, option.parameter_name):
                    given[option.key] = value
            function(**values, settings=self.load(config, assignments, given))

        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters}
        return run

    def load(self, config: Path | None, assignments: list[str] | None, given: dict[str, Any]) -> Settings:
        """The settings of a run: the defaults, the config file, the --set assignments, then the `given`
        options by dotted key."""
        data = read_settings(config, parse_assignments(assignments or [], self.example), given)
        if self.complete is not None:
            self.complete(data)
        return build(self.cls, data)

    def _file_parameters(self) -> list[inspect.Parameter]:
        config = typer.Option(
            None,
            "--config",
            metavar="FILE.yaml",
            dir_okay=False,
            help=f"{self.about} Any setting by its dotted name, as --set names it; `base: FILE` builds on another "
            "config file. Precedence, lowest first: the defaults, --config, --set, the options that name a setting.",
        )
        assign = typer.Option(
            None,
            "--set",
            metavar="KEY=VALUE",
            help=f"Override a setting: --set {self.example} (repeatable; values are YAML).",
        )
        keyword = inspect.Parameter.KEYWORD_ONLY
        return [
            inspect.Parameter(CONTEXT_PARAMETER, keyword, annotation=typer.Context),
            inspect.Parameter(CONFIG_PARAMETER, keyword, default=config, annotation=Optional[Path]),
            inspect.Parameter(SET_PARAMETER, keyword, default=assign, annotation=Optional[list[str]]),
        ]


def setting_option(defaults: Any, key: str, flag: str | None) -> SettingOption:
    """The option of the setting `key` of the settings `defaults`; a field without help is a programming error."""
    *sections, name = key.split(".")
    section = functools.reduce(getattr, sections, defaults)
    (field,) = [item for item in dataclasses.fields(section) if item.name == name]
    if HELP_KEY not in field.metadata:
        raise TypeError(f"the setting {key} has no help: declare it with quoter.settings.setting")
    hint = typing.get_type_hints(type(section))[name]
    flag = flag or "--" + name.replace("_", "-")
    return SettingOption(key, flag, field.metadata[HELP_KEY], hint, getattr(section, name))


def _given(context: typer.Context, name: str) -> bool:
    """Whether the option was given (on the command line or in its environment variable), not defaulted. By
    name: typer may bring its own copy of click, whose ParameterSource is another class."""
    source = context.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")
