"""Which hosted banks answer a request that does not name its language: those of the hosted script the
context has most letters of. Latin letters go to en; Chinese characters go to every hosted Chinese bank,
modern and classical, since a writer of modern Chinese may want a saying or a classical line alike: which
bank's quote fits is for the ranking to say, not the text's own register (chinese_merge merges the two
answers). A context with no letter of a hosted script cannot be placed."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from quoter.errors import QuoterError
from quoter.languages import CHINESE, HAN, LATIN, Language


class LanguageChoiceError(QuoterError):
    """The request's language is not hosted, or cannot be told from its text."""


def _scripts(hosted: Collection[Language]) -> list[re.Pattern[str]]:
    """The letters of the hosted languages' scripts: Latin, Han, or both."""
    scripts = [LATIN] if Language.EN in hosted else []
    return scripts + [HAN] if any(language in hosted for language in CHINESE) else scripts


def hosted_letters_pattern(hosted: Collection[Language]) -> str:
    """A regular expression (JSON Schema's dialect too) matching a letter of a hosted script: a text without
    one cannot be placed when several languages are hosted."""
    return "[" + "".join(script.pattern[1:-1] for script in _scripts(hosted)) + "]"


def _hosted_names(hosted: Collection[Language]) -> str:
    return ", ".join(sorted(language.value for language in hosted))


def choose_hosted_banks(
    requested: Language | None, hosted: Collection[Language], texts: Sequence[str]
) -> tuple[tuple[Language, ...], bool]:
    """The banks (hosted languages) to answer from, in CHINESE order when there are two, and whether they were
    guessed (not requested, and more than one language hosted)."""
    if requested is not None:
        if requested not in hosted:
            raise LanguageChoiceError(f"language '{requested.value}' is not hosted; hosted: {_hosted_names(hosted)}")
        return (requested,), False
    if len(hosted) == 1:
        return (next(iter(hosted)),), False
    text, scripts = "".join(texts), _scripts(hosted)
    latin, han = (len(script.findall(text)) if script in scripts else 0 for script in (LATIN, HAN))
    if han == latin == 0:
        raise LanguageChoiceError(
            f"cannot tell the language of this text (no letter of a hosted language); name lang "
            f"({_hosted_names(hosted)})"
        )
    if latin >= han:
        return (Language.EN,), True
    return tuple(language for language in CHINESE if language in hosted), True
