"""Which bundles and quote sets a server (or `quoter batch`) ranks with: the bundle folders it is given
(`LANG=DIR`), each with its own quotes or a quote set its quote encoder made (`LANG=FILE`, written by
`quoter encode`); or else the built-in default, a zero-shot bundle over the built-in quote bank for each
language.

Live quote changes are saved beside what is served: in the bundle folder (`quote_index/`) for its own
quotes, in `FILE.live/` for a quote set file, or, with a state folder (`--state DIR`, `$QUOTER_STATE`),
in `DIR/LANG/`; a read-only bundle or quote set serves as it is and needs a state folder for changes. The
built-in default has no folder of its own: its changes go to `DIR/LANG/` of the state folder, by default
`$XDG_STATE_HOME/quoter` (`~/.local/state/quoter`). With a PostgreSQL database instead (`--store URL`,
`$QUOTER_STORE`), every language's live set is kept there, as the set named after the language, and shared with
every process that serves it (postgres_store)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from quoter.bundle import Bundle
from quoter.default_bundles import default_bundles
from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.quote_set import read_quote_set
from quoter.serving.live.live_quotes import LIVE_FOLDER
from quoter.serving.live.quote_store import ChangeNotSavedError, SetLockedError
from quoter.serving.recommender import Recommender
from quoter.serving.settings import RecommenderConfig

# Where a quote set file's live changes go, unless a state folder is given: FILE + this suffix.
LIVE_SUFFIX = ".live"
STATE_HOME_ENV = "XDG_STATE_HOME"
STATE_HOME = "~/.local/state"  # the XDG base directory specification's default for $XDG_STATE_HOME


def default_state_folder() -> Path:
    """Where the built-in default keeps live quote changes when no state folder is given:
    $XDG_STATE_HOME/quoter, else ~/.local/state/quoter."""
    return Path(os.environ.get(STATE_HOME_ENV) or STATE_HOME).expanduser() / "quoter"


def parse_language_spec(spec: str, option: str = "--bundle") -> tuple[Language, Path]:
    """Read `LANG=PATH`, e.g. `en=models/en`; `option` names the option in errors."""
    name, sep, path = spec.partition("=")
    if not sep or not path:
        raise QuoterError(f"{option} expects LANG=PATH, got '{spec}'")
    try:
        return Language(name.strip()), Path(path)
    except ValueError:
        known = ", ".join(language.value for language in Language)
        raise QuoterError(f"unknown language '{name}' in {option} {spec}; languages: {known}") from None


def hosted_recommender(
    folder: Path,
    config: RecommenderConfig,
    quotes: Path | None = None,
    state: Path | None = None,
    language: Language | None = None,
    database: str | None = None,
) -> Recommender:
    """A recommender for the bundle in `folder` (of `language`, when given) over its own quotes or the quote
    set file `quotes`; live changes are read from and saved to the place the module's docstring names, or to
    the PostgreSQL `database` (a URL)."""
    bundle = Bundle.load(folder)
    if language is not None and bundle.language is not language:
        raise InputError(f"the bundle's language is {bundle.language.value}, not {language.value}", path=folder)
    served = None
    if quotes is not None:
        served = read_quote_set(quotes)
        served.check_encoder(bundle.quote_encoder, quotes)
    live = live_folder(folder, quotes, state, bundle.language)
    return Recommender(bundle, config, folder, served, live, database)


def live_folder(folder: Path, quotes: Path | None, state: Path | None, language: Language) -> Path:
    """Where the live changes of the bundle in `folder` serving `quotes` (None: its own) are saved (in
    `quote_index/` inside it): see the module's docstring."""
    if state is not None:
        return state / language.value
    return folder if quotes is None else quotes.with_name(quotes.name + LIVE_SUFFIX)


def can_save_changes(live: Path) -> bool:
    """Whether quote changes can be saved in `live`: it, or the nearest folder above it that exists, is
    writable."""
    place = live / LIVE_FOLDER
    while not place.exists() and place.parent != place:
        place = place.parent
    return os.access(place, os.W_OK)


def load_hosted(
    bundle_specs: Sequence[str],
    quote_specs: Sequence[str],
    config: RecommenderConfig,
    state: Path | None = None,
    warn: Callable[[str], None] = print,
    database: str | None = None,
) -> list[Recommender]:
    """Recommenders for bundle folders given as `LANG=DIR`, each over the quote set given for its language
    as `LANG=FILE`, if any, else its own quotes, with live changes in their folders or the PostgreSQL
    `database`; `warn` is told of each folder where changes cannot be saved."""
    bundles = dict(parse_language_spec(spec) for spec in bundle_specs)
    quote_sets = dict(parse_language_spec(spec, "--quotes") for spec in quote_specs)
    for language in quote_sets:
        if language not in bundles:
            raise QuoterError(f"--quotes {language.value}=...: no --bundle {language.value}=DIR whose encoder made it")
    recommenders = []
    for language, folder in bundles.items():
        recommenders.append(hosted_recommender(folder, config, quote_sets.get(language), state, language, database))
        live = live_folder(folder, quote_sets.get(language), state, language)
        if database is None and not can_save_changes(live):
            warn(f"{live} is read-only: {language.value} is served, but adding or removing quotes needs --state DIR")
    return recommenders


def hold_quote_sets(recommenders: Sequence[Recommender]) -> None:
    """Make this server, from its start, the one process that changes the quote sets it saves in folders, so that
    a second server given the same folder is refused at its start, not at its first change. A folder where changes
    cannot be saved leaves its set served as it is (the commands say so)."""
    for recommender in recommenders:
        try:
            recommender.quotes.hold()
        except SetLockedError as error:
            raise QuoterError(
                f"{error.folder}: another server is serving these quotes and changing them; stop it, or give this "
                "one another --state DIR"
            ) from None
        except ChangeNotSavedError:
            pass


def default_recommenders(
    languages: Sequence[Language],
    config: RecommenderConfig,
    state: Path | None = None,
    warn: Callable[[str], None] = print,
    database: str | None = None,
) -> list[Recommender]:
    """Recommenders over the built-in default of each language, whose live changes are read from and saved to
    `state/LANG/` (None: default_state_folder()) or the PostgreSQL `database`; `warn` is told when what the
    defaults learned cannot be cached."""
    root = default_state_folder() if state is None else state
    bundles = default_bundles(languages, warn=warn)
    return [Recommender(b, config, state=root / b.language.value, database=database) for b in bundles]
