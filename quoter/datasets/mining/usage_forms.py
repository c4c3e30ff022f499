"""What the usage miner searches for each bank quote, and which rule a find counts for.

The rules, in the order they are applied (each adds to those before it):

* `verbatim`: the whole quote;
* `sentence`: one or more of its sentences in order, long enough not to be an everyday phrase (the
  builder's partial-occurrence rule);
* `clause`: its first clause (up to the first , ; : or dash), when that is long enough to be distinctive;
* `variant` (Chinese): all of these again, with the quote and the text brought to one script (OpenCC t2s)
  and one form of the variant characters below;
* `idiom-example`: the idiom dictionary's own examples of the quote, where `～` stands for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from quoter.datasets.mining.matching_text import MatchingForm

RULES = ("verbatim", "sentence", "clause", "variant", "idiom-example")
# Where a first clause ends: a comma, semicolon, colon or dash, English or Chinese.
CLAUSE_END = re.compile(r"[,;:—，；：、]|--")
# Characters that the quotes and the texts write for one another; each group folds onto its first character.
# Those found by searching the corpora for the bank quotes with one character changed (惟见长江天际流,
# 非淡薄无以明志, 无精打彩) and 说 for 悦 (不亦说乎); a quote with one character changed is otherwise
# another saying (同心协力, 刮目相待), so no other pairs are folded.
VARIANT_GROUPS = ("说悦", "唯惟", "泊薄", "采彩")
VARIANT_FOLD = str.maketrans({variant: group[0] for group in VARIANT_GROUPS for variant in group[1:]})


@dataclass(frozen=True)
class SearchForm:
    """Text searched for bank quote `quote_id`: its sentences, or (`clause`) its first clause."""

    quote_id: int
    sentences: tuple[str, ...]
    clause: bool

    def rule(self, complete: bool) -> str:
        """The rule a find of this form counts for; `complete`: every sentence of it was found, in order."""
        if self.clause:
            return "clause"
        return "verbatim" if complete else "sentence"


def first_clause(sentence: str) -> str | None:
    """The text of `sentence` before its first clause mark, if it has one."""
    mark = CLAUSE_END.search(sentence)
    return sentence[: mark.start()] if mark else None


def search_forms(
    quotes: list[str], split: Callable[[str], list[str]], form: MatchingForm, min_clause_units: int
) -> list[SearchForm]:
    """The forms of every quote: its sentences, then each first clause of at least `min_clause_units` words
    (English) or characters (Chinese) that is not itself a sentence of a quote (that one is a sentence find)."""
    quote_forms = [
        SearchForm(quote_id, tuple(form.searchable(quote, split(quote))), clause=False)
        for quote_id, quote in enumerate(quotes)
    ]
    sentences = {form.normalise(sentence) for quote_form in quote_forms for sentence in quote_form.sentences}
    clause_forms = []
    for quote_form in quote_forms:
        clause = first_clause(quote_form.sentences[0])
        normalised = form.normalise(clause) if clause is not None else ""
        if normalised and form.units(normalised) >= min_clause_units and normalised not in sentences:
            clause_forms.append(SearchForm(quote_form.quote_id, (normalised,), clause=True))
    return quote_forms + clause_forms


def fold_variants(text: str) -> str:
    """`text` with every variant character of VARIANT_GROUPS as its group's first; one character for one, so
    offsets into the folded text are offsets into `text`."""
    return text.translate(VARIANT_FOLD)


def variant_forms(forms: list[SearchForm], convert: Callable[[str], str] | None) -> list[SearchForm]:
    """The same forms, in the same order, converted (OpenCC t2s) if `convert` is given and folded."""
    return [
        replace(
            search_form, sentences=tuple(fold_variants(convert(s) if convert else s) for s in search_form.sentences)
        )
        for search_form in forms
    ]
