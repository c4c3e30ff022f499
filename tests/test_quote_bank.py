"""The built-in quote bank: big enough, clean, in the right language, and loaded without torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from quoter.errors import InputError
from quoter.languages import HAN, Language, guess_language
from quoter.quote_bank import bank_path, load_quote_bank
from quoter.quote_list import read_quote_tsv
from quoter.quote_record import QuoteRecord

MIN_QUOTES = 300
# Anything beyond ASCII that English quotes legitimately use: dashes, curly quotes, accented names.
NON_LATIN_LETTER = re.compile(r"[^\W\d_A-Za-zÀ-ÿ]")


@pytest.fixture(scope="module", params=list(Language), ids=lambda language: language.value)
def bank(request) -> tuple[Language, list[QuoteRecord]]:
    return request.param, load_quote_bank(request.param)


def test_each_language_has_enough_quotes_with_sources(bank):
    language, quotes = bank
    assert len(quotes) >= MIN_QUOTES, f"{language.value}: only {len(quotes)} quotes"
    assert all(isinstance(quote, QuoteRecord) for quote in quotes)
    assert all(quote.text.strip() and quote.source.strip() for quote in quotes)


def test_no_duplicates_within_a_language(bank):
    language, quotes = bank
    texts = [quote.text for quote in quotes]
    assert len(set(texts)) == len(texts)
    # Nor the same quote differing only in punctuation, spacing or case.
    normalised = [re.sub(r"[\W_]+", "", text).casefold() for text in texts]
    duplicates = {text for text in normalised if normalised.count(text) > 1}
    assert not duplicates, f"{language.value}: {sorted(duplicates)[:5]}"


# Quotes a user study found missing and that were added; each must stay in the English bank verbatim.
EXPECTED_ENGLISH = (
    "Waste not, want not.",
    "The only thing we have to fear is fear itself.",
    "If at first you don't succeed, try, try again.",
    "The unexamined life is not worth living.",
    "What does not kill me makes me stronger.",
    "United we stand, divided we fall.",
)
# The size of each bank as documented in SOURCES.md; a change to a bank file updates both.
BANK_SIZES = {Language.EN: 675, Language.ZH: 613, Language.ZH_CLASSICAL: 587}


def test_each_bank_has_the_size_sources_md_gives(bank):
    language, quotes = bank
    assert len(quotes) == BANK_SIZES[language]
    sources = bank_path(language).with_name("SOURCES.md").read_text(encoding="utf-8")
    assert f"| `{bank_path(language).name}` | `{language.value}` | {len(quotes)} |" in sources


def test_the_quotes_a_user_study_expected_are_in_the_english_bank():
    sources = {quote.text: quote.source for quote in load_quote_bank(Language.EN)}
    missing = [quote for quote in EXPECTED_ENGLISH if quote not in sources]
    assert not missing, missing
    assert sources["The only thing we have to fear is fear itself."].startswith("Franklin D. Roosevelt")
    assert sources["The unexamined life is not worth living."].startswith("Socrates, in Plato")
    assert sources["What does not kill me makes me stronger."].startswith("Friedrich Nietzsche")


def test_no_quote_in_both_chinese_files():
    modern = {quote.text for quote in load_quote_bank(Language.ZH)}
    classical = {quote.text for quote in load_quote_bank(Language.ZH_CLASSICAL)}
    assert not modern & classical


def test_english_is_latin_script():
    for quote in load_quote_bank(Language.EN):
        assert not HAN.search(quote.text), quote.text
        assert not NON_LATIN_LETTER.search(quote.text), quote.text
        assert re.search(r"[A-Za-z]", quote.text), quote.text


@pytest.mark.parametrize("language", [Language.ZH, Language.ZH_CLASSICAL], ids=lambda language: language.value)
def test_chinese_files_are_chinese(language):
    for quote in load_quote_bank(language):
        assert not re.search(r"[A-Za-z]", quote.text), quote.text
        assert len(HAN.findall(quote.text)) >= 4, quote.text


def test_guessed_language_matches_each_file(bank):
    language, quotes = bank
    guessed, reason = guess_language(quote.text for quote in quotes)
    assert guessed is language, reason


def test_loading_the_bank_does_not_import_torch():
    code = (
        "import sys\n"
        "from quoter.languages import Language\n"
        "from quoter.quote_bank import load_quote_bank\n"
        "assert all(load_quote_bank(language) for language in Language)\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bank_files_are_in_the_package():
    for language in Language:
        assert bank_path(language).is_file()
    assert bank_path(Language.EN).with_name("SOURCES.md").is_file()


def test_header_and_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "bank.tsv"
    path.write_text("quote\tsource\nKnow thyself.\tInscription at Delphi\n\nBe brief.\tProverb\n", encoding="utf-8")
    assert read_quote_tsv(path) == [
        QuoteRecord("Know thyself.", "Inscription at Delphi"),
        QuoteRecord("Be brief.", "Proverb"),
    ]


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ("quote\tsource\nKnow thyself.\tDelphi\nno source here\n", 3, "expected 2 or 3 tab-separated fields"),
        ("Know thyself.\tDelphi\nA\tB\tC\tD\n", 2, "found 4"),
        ("Know thyself.\t \n", 1, "empty source"),
        ("\tDelphi\n", 1, "empty quote"),
        ("Know thyself.\tDelphi\n\u200b\u0301\u2060\tDelphi\n", 2, "empty quote"),
        ("Know thyself.\tDelphi\nKnow thyself.\tSocrates\n", 2, "duplicate quote, first on line 1"),
    ],
)
def test_malformed_file_names_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_quote_tsv(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line
    assert message in str(caught.value)
    assert f"{path}:{line}" in str(caught.value)


def test_file_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("Caf\xe9 society.\tAnonymous\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8") as caught:
        read_quote_tsv(path)
    assert caught.value.path == str(path)


def test_a_quote_list_may_carry_glosses_and_the_modern_bank_has_them(tmp_path):
    path = tmp_path / "quotes.tsv"
    path.write_text(
        "quote\tsource\tgloss\n守株待兔\t韩非子\t比喻死守经验，不知变通。\n学而时习之\t\t\n", encoding="utf-8"
    )
    assert read_quote_tsv(path, require_source=False) == [
        QuoteRecord("守株待兔", "韩非子", "比喻死守经验，不知变通。"),
        QuoteRecord("学而时习之"),
    ]
    with pytest.raises(InputError, match="quotes.tsv:3 \\(field 'source'\\): empty source"):
        read_quote_tsv(path)
    glossed = {quote.text: quote.gloss for quote in load_quote_bank(Language.ZH) if quote.gloss}
    assert len(glossed) >= 300 and "买椟还珠" in glossed


@pytest.mark.parametrize("language", list(Language), ids=lambda language: language.value)
def test_the_writers_check_has_30_distinct_bank_quotes_per_language(language):
    path = Path(__file__).parent / "data" / "writers_check" / f"{language.value}.jsonl"
    checks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    bank = {quote.text for quote in load_quote_bank(language)}
    assert all(set(check) == {"left", "right", "quote"} and check["left"].strip() for check in checks)
    intended = [check["quote"] for check in checks]
    assert len(set(intended)) == len(intended) >= 30 and set(intended) <= bank


def wording(text: str, language: Language) -> list[str]:
    """A text's words in order (English, lower case) or its Chinese characters."""
    if language is Language.EN:
        return re.findall(r"[a-z']+", text.lower())
    return HAN.findall(text)


def test_every_bank_quote_has_three_written_usage_examples_that_do_not_repeat_its_wording(bank):
    language, quotes = bank
    path = bank_path(language).parent / "usage" / f"{language.value}.written.tsv"
    examples: dict[str, list[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        left, quote, right = line.split("\t")
        assert (left + right).strip(), f"{path}:{number}: no context"
        examples.setdefault(quote, []).append(f"{left} {right}")
    assert set(examples) == {record.text for record in quotes}
    assert {quote: len(contexts) for quote, contexts in examples.items()} == {q.text: 3 for q in quotes}
    for quote, contexts in examples.items():
        words = wording(quote, language)
        runs = {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
        for context in contexts:
            near = wording(context, language)
            repeated = runs & {tuple(near[i : i + 3]) for i in range(len(near) - 2)}
            assert not repeated, f"{path}: a passage for {quote!r} repeats {repeated}"
