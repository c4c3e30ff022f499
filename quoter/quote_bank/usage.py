"""Usage examples of the built-in bank: contexts in which each bank quote is used, which the default bundles
learn from (CRM and knn read them; the fusion of the signals is fitted on them).

Two files a language, in `usage/` beside the bank (usage/README.md says how they are made):
- `LANG.written.tsv`: `left<TAB>quote<TAB>right`, examples written for Quoter, three a quote;
- `LANG.real.tsv`: `left<TAB>quote<TAB>right<TAB>file<TAB>line<TAB>rule<TAB>part`, with a header: real
  contexts mined from the shared data (`quoter data usage`), each with the file and line it comes from, the
  matching rule that found it, and its part: `fit`, or `held-back`, kept out of everything fitted and
  used only to measure (benchmarks/quality.py).
No field may hold a control character, a bidirectional control or a tag character (quoter.text_safety). Loading
them imports nothing heavy, like the bank itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from quoter.datasets.dataset import Sample
from quoter.errors import InputError
from quoter.languages import Language
from quoter.quote_record import QuoteRecord
from quoter.text_lines import decoded_lines
from quoter.text_safety import unsafe_text

__all__ = ["REAL_HEADER", "BankUsage", "UsageExample", "bank_usage", "read_usage_file", "usage_path"]

REAL_HEADER = ("left", "quote", "right", "file", "line", "rule", "part")
FIT, HELD_BACK = "fit", "held-back"
WRITTEN = "written"  # the rule (and origin) of a written example, and the kind of its file
REAL = "real"


@dataclass(frozen=True)
class UsageExample:
    """A context in which `quote` stands between `left` and `right`; `origin` is `file:line` of a real one,
    else `written`."""

    left: str
    quote: str
    right: str
    origin: str = WRITTEN
    rule: str = WRITTEN
    held_back: bool = False


@dataclass(frozen=True)
class BankUsage:
    """A bank's usage examples as samples over the bank's quote ids: `fit` (written, and real ones not held
    back; `fit_real` tells which are real) and `held_back` (real ones only measured on)."""

    fit: list[Sample]
    fit_real: list[bool]
    held_back: list[Sample]


def usage_path(language: Language, kind: str) -> Path:
    """The `kind` (WRITTEN or REAL) usage file of a language, inside the installed package."""
    name = f"{Language(language).value}.{kind}.tsv"
    return Path(str(resources.files("quoter.quote_bank").joinpath("usage", name)))


def read_usage_file(path: Path) -> list[UsageExample]:
    """Read a written (three fields a line) or real (seven, with the REAL_HEADER line) usage file; a field that
    holds a character no text may is refused, naming file, line and field."""
    examples = []
    for number, line in decoded_lines(path, "usage examples"):
        if not line.strip():
            continue
        fields = line.split("\t")
        if number == 1 and tuple(fields) == REAL_HEADER:
            continue
        _check_fields(fields, path, number)
        if len(fields) == 3:
            examples.append(UsageExample(*fields))
        elif len(fields) == len(REAL_HEADER):
            examples.append(_real_example(fields, path, number))
        else:
            raise InputError(
                f"expected 3 or {len(REAL_HEADER)} tab-separated fields, found {len(fields)}", path, number
            )
    return examples


def _check_fields(fields: list[str], path: Path, number: int) -> None:
    # The first three fields of both kinds are left, quote and right. A field of a tab-separated line holds no
    # tab or line feed, so the one-line rule is the contexts' rule too.
    for field, value in zip(REAL_HEADER, fields):
        problem = unsafe_text(value)
        if problem is not None:
            raise InputError(problem, path, number, field)


def _real_example(fields: list[str], path: Path, number: int) -> UsageExample:
    left, quote, right, file, line, rule, part = fields
    if part not in (FIT, HELD_BACK):
        raise InputError(f"part must be {FIT} or {HELD_BACK}, not '{part}'", path, number, "part")
    return UsageExample(left, quote, right, f"{file}:{line}", rule, part == HELD_BACK)


def bank_usage(language: Language, quotes: list[QuoteRecord]) -> BankUsage:
    """The usage examples of the built-in bank of `language` whose quote is in `quotes` (by text), as
    samples whose quote ids index `quotes`."""
    id_of = {record.text: index for index, record in enumerate(quotes)}
    usage = BankUsage([], [], [])
    for kind in (WRITTEN, REAL):
        path = usage_path(language, kind)
        if not path.is_file():
            continue
        for line, example in enumerate(read_usage_file(path), start=1):
            if example.quote not in id_of:
                continue
            sample = Sample(example.left, id_of[example.quote], example.right, line)
            if example.held_back:
                usage.held_back.append(sample)
            else:
                usage.fit.append(sample)
                usage.fit_real.append(kind == REAL)
    return usage
