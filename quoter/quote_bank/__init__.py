"""The built-in quote bank: well-known public-domain quotes with their sources, one file per language.

Each file is a quote list in its TSV format (quoter.quote_list), every quote with its source, some with a
gloss.
SOURCES.md says where the quotes come from and why they may be shipped. Loading the bank imports nothing
heavy (no torch), so the server can rank it offline.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from quoter.languages import Language
from quoter.quote_list import read_quote_tsv
from quoter.quote_record import QuoteRecord

BANK_FILES = {Language.EN: "en.tsv", Language.ZH: "zh.tsv", Language.ZH_CLASSICAL: "zh-classical.tsv"}


def bank_path(language: Language) -> Path:
    """The bank file of a language, inside the installed package."""
    return Path(str(resources.files(__name__).joinpath(BANK_FILES[Language(language)])))


def load_quote_bank(language: Language) -> list[QuoteRecord]:
    """The built-in quotes of a language (en, zh or zh-classical), in file order."""
    return read_quote_tsv(bank_path(language))
