"""The three kinds of quote Quoter knows, and how to tell them apart from the text itself."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum


class Language(str, Enum):
    """English, modern (standard) Chinese, or classical Chinese."""

    EN = "en"
    ZH = "zh"
    ZH_CLASSICAL = "zh-classical"


# The two Chinese languages, modern first: what most writers write.
CHINESE = (Language.ZH, Language.ZH_CLASSICAL)
# The language of each official QuoteR part.
PART_LANGUAGES = {"english": Language.EN, "modern_chinese": Language.ZH, "ancient_chinese": Language.ZH_CLASSICAL}

HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN = re.compile(r"[A-Za-z]")
# Function words typical of each register; their ratio in the quotes separates the two well.
CLASSICAL_MARKERS = set("之乎者也矣焉哉兮曰其而於")
MODERN_MARKERS = set("的了是在们这那么吗呢")


def guess_language(texts: Iterable[str]) -> tuple[Language, str]:
    """Guess the language of some texts (a dataset's quotes and contexts); return it with the reason."""
    han = latin = classical = modern = 0
    for text in texts:
        han += len(HAN.findall(text))
        latin += len(LATIN.findall(text))
        classical += sum(char in CLASSICAL_MARKERS for char in text)
        modern += sum(char in MODERN_MARKERS for char in text)
    if han <= latin:
        return Language.EN, f"{latin:,} Latin letters against {han:,} Chinese characters"
    if classical > modern:
        return Language.ZH_CLASSICAL, f"classical function words ({classical:,}) outnumber modern ones ({modern:,})"
    return Language.ZH, f"modern function words ({modern:,}) are at least as many as classical ones ({classical:,})"


def choose_language(requested: Language | None, part: str | None, texts: Iterable[str]) -> tuple[Language, str]:
    """The language to process a dataset in: as requested, else the official part's, else guessed.

    Guess from the quotes and the contexts they are cited in: four-character idioms look classical on
    their own, but the modern text around them shows which language the dataset is in.
    """
    if requested is not None:
        return requested, "as requested"
    if part is not None and part in PART_LANGUAGES:
        return PART_LANGUAGES[part], f"the language of the official '{part}' part"
    language, reason = guess_language(texts)
    return language, f"guessed from the quotes and contexts: {reason}"
