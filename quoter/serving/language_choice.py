"""Which hosted bundle answers a request that does not name its language: the one of the hosted script the
context has most letters of (Latin: en; Han: Chinese), and between modern and classical Chinese the one its
function words point to, modern when they do not tell. A context with no letter of a hosted script cannot
be placed."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from quoter.errors import QuoterError
from quoter.languages import CLASSICAL_MARKERS, HAN, LATIN, MODERN_MARKERS, Language

CHINESE = (Language.ZH, Language.ZH_CLASSICAL)


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


def choose_hosted_language(
    requested: Language | None, hosted: Collection[Language], texts: Sequence[str]
) -> tuple[Language, bool]:
    """The language to answer in and whether it was guessed (not requested, and more than one hosted)."""
    if requested is not None:
        if requested not in hosted:
            raise LanguageChoiceError(f"language '{requested.value}' is not hosted; hosted: {_hosted_names(hosted)}")
        return requested, False
    if len(hosted) == 1:
        return next(iter(hosted)), False
    text, scripts = "".join(texts), _scripts(hosted)
    latin, han = (len(script.findall(text)) if script in scripts else 0 for script in (LATIN, HAN))
    if han == latin == 0:
        raise LanguageChoiceError(
            f"cannot tell the language of this text (no letter of a hosted language); name lang "
            f"({_hosted_names(hosted)})"
        )
    if latin >= han:
        return Language.EN, True
    chinese = [language for language in CHINESE if language in hosted]
    if len(chinese) == 1:
        return chinese[0], True
    # Both Chinese bundles are hosted: the function words tell them apart, if they differ; modern Chinese is
    # what most writers write.
    classical = sum(char in CLASSICAL_MARKERS for char in text)
    modern = sum(char in MODERN_MARKERS for char in text)
    return (Language.ZH_CLASSICAL if classical > modern else Language.ZH), True
