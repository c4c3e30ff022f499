"""The built-in quote bank: well-known public-domain quotes with their sources, one file per language.

Each file is UTF-8, tab-separated ``quote<TAB>source[<TAB>gloss]``, one quote a line (the gloss, a short
explanation the quote encoder may read, is optional); a first line ``quote<TAB>source[<TAB>gloss]`` is a
header and skipped, as are blank lines. Quote lists given to the command line use the same format.
SOURCES.md says where the quotes come from and why they may be shipped. Loading the bank imports nothing
heavy (no torch), so the server can rank it offline.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from quoter.errors import InputError
from quoter.languages import Language
from quoter.quote_record import QuoteRecord

__all__ = ["BANK_FILES", "HEADER", "bank_path", "load_quote_bank", "read_quote_bank_file"]

HEADER = ("quote", "source", "gloss")
BANK_FILES = {Language.EN: "en.tsv", Language.ZH: "zh.tsv", Language.ZH_CLASSICAL: "zh-classical.tsv"}


def bank_path(language: Language) -> Path:
    """The bank file of a language, inside the installed package."""
    return Path(str(resources.files(__name__).joinpath(BANK_FILES[Language(language)])))


def read_quote_bank_file(path: str | Path, require_source: bool = True) -> list[QuoteRecord]:
    """Read and check a ``quote<TAB>source[<TAB>gloss]`` file; every row needs a quote (and a source, if
    `require_source`), no quote twice."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"not UTF-8 ({error.reason} at byte {error.start})", path) from None
    except OSError as error:
        raise InputError(f"cannot read the quote list: {error.strerror or error}", path) from None
    records: list[QuoteRecord] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.removeprefix("\ufeff") if number == 1 else raw
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and tuple(field.strip().lower() for field in fields) in (HEADER[:2], HEADER):
            continue
        if len(fields) not in (2, 3):
            raise InputError(
                f"expected 2 or 3 tab-separated fields (quote, source[, gloss]), found {len(fields)}", path, number
            )
        quote, source, gloss = (*(field.strip() for field in fields), "")[:3]
        if not quote:
            raise InputError("empty quote", path, number, "quote")
        if require_source and not source:
            raise InputError("empty source", path, number, "source")
        if quote in seen:
            raise InputError(f"duplicate quote, first on line {seen[quote]}", path, number, "quote")
        seen[quote] = number
        records.append(QuoteRecord(quote, source, gloss))
    if not records:
        raise InputError("no quotes in the quote list", path)
    return records


def load_quote_bank(language: Language) -> list[QuoteRecord]:
    """The built-in quotes of a language (en, zh or zh-classical), in file order."""
    return read_quote_bank_file(bank_path(language))
