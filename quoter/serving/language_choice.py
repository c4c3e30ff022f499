"""Which hosted bundle answers a request that does not name its language: decided by the script of the
context, and between modern and classical Chinese only when the text says which."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from quoter.errors import QuoterError
from quoter.languages import CLASSICAL_MARKERS, HAN, LATIN, MODERN_MARKERS, Language, guess_language

CHINESE = (Language.ZH, Language.ZH_CLASSICAL)


class LanguageChoiceError(QuoterError):
    """The request's language is not hosted, or cannot be told from its text."""


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
    text = "".join(texts)
    han, latin = len(HAN.findall(text)), len(LATIN.findall(text))
    if han == latin == 0:
        raise LanguageChoiceError(f"cannot tell the language of this text; name lang ({_hosted_names(hosted)})")
    if latin >= han:
        if Language.EN in hosted:
            return Language.EN, True
        raise LanguageChoiceError(f"the text looks English, which is not hosted; name lang ({_hosted_names(hosted)})")
    chinese = [language for language in CHINESE if language in hosted]
    if len(chinese) == 1:
        return chinese[0], True
    if not chinese:
        raise LanguageChoiceError(f"the text looks Chinese, which is not hosted; name lang ({_hosted_names(hosted)})")
    # Both Chinese bundles are hosted: only the function words can tell them apart, and only if they differ.
    classical = sum(char in CLASSICAL_MARKERS for char in text)
    modern = sum(char in MODERN_MARKERS for char in text)
    if classical == modern:
        raise LanguageChoiceError(
            "cannot tell modern from classical Chinese in this text; name lang: zh or zh-classical"
        )
    return guess_language([text])[0], True
