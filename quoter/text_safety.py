"""Characters no text Quoter takes in may hold, and the checks of every text field: the API's request bodies, the
quote lists and the bank's usage examples all refuse them alike. Kept free of heavy imports, like the quote bank.

Refused are control characters (C0, DEL and C1: U+0000-U+001F, U+007F-U+009F): NUL, which PostgreSQL cannot
store, and ESC (U+001B) and CSI (U+009B), which open the ANSI escape sequences that rewrite a terminal, so
refusing control characters refuses those sequences; the bidirectional embeddings and overrides (U+202A-U+202E)
and isolates (U+2066-U+2069), which make a text display in another order than it reads; and the tag characters
(U+E0000-U+E007F), invisible copies of ASCII that can carry text past a reader (emoji subdivision flags, such as
England's, are spelled with them and are refused too). A text of several lines (a context, a usage example) may
hold tabs and line breaks (line feed, and the carriage return of Windows line ends); a one-line text (a quote,
its source and gloss) may not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from quoter.errors import InputError
from quoter.quote_record import QuoteRecord, has_visible_text

# The refused characters, each range (first, last code point) with what its characters are called.
REFUSED = (
    (0x0000, 0x001F, "a control character"),
    (0x007F, 0x009F, "a control character"),
    (0x202A, 0x202E, "a bidirectional embedding or override"),
    (0x2066, 0x2069, "a bidirectional isolate"),
    (0xE0000, 0xE007F, "a tag character"),
)
# What a text of several lines may hold of them: tab, line feed and carriage return.
MULTILINE_ALLOWED = (0x09, 0x0A, 0x0D)


def _class_body(multiline: bool) -> str:
    """The refused characters as the inside of a regex character class that Python's `re` and JSON Schema's
    ECMA-262 (Unicode mode) read alike: \\uXXXX escapes, and the characters beyond U+FFFF as themselves (the
    one spelling of them both take)."""
    allowed = MULTILINE_ALLOWED if multiline else ()
    ranges = []
    for first, last, _ in REFUSED:
        start = first
        for code in sorted(code for code in allowed if first <= code <= last):
            if start < code:
                ranges.append((start, code - 1))
            start = code + 1
        if start <= last:
            ranges.append((start, last))
    return "".join(f"{_spelled(first)}-{_spelled(last)}" for first, last in ranges)


def _spelled(code: int) -> str:
    return f"\\u{code:04X}" if code <= 0xFFFF else chr(code)


# A character a one-line text may hold, and one a text of several lines may: character classes for patterns.
ONE_LINE_CHARACTER = f"[^{_class_body(multiline=False)}]"
MULTILINE_CHARACTER = f"[^{_class_body(multiline=True)}]"
# The searches for a refused character, by whether the text may have several lines.
_SEARCHES = {multiline: re.compile(f"[{_class_body(multiline)}]") for multiline in (False, True)}

# Why a text that shows nothing is refused; the message of every such field, preceded by "the FIELD ".
_SHOWS_NOTHING = (
    "has no letter, number, punctuation or symbol: only white space, control, zero-width or combining characters"
)


def unsafe_text(text: str, multiline: bool = False) -> str | None:
    """What is wrong with `text`, its first refused character (see the module), as a message that does not repeat
    it: "not allowed: a control character (U+0000) at character 5" (counted from 1); None when it holds none.
    `multiline`: the text may have several lines, and tabs."""
    found = _SEARCHES[multiline].search(text)
    if found is None:
        return None
    code = ord(found.group())
    kind = next(kind for first, last, kind in REFUSED if first <= code <= last)
    return f"not allowed: {kind} (U+{code:04X}) at character {found.start() + 1}"


def text_problem(text: str, field: str, optional: bool = False) -> str | None:
    """What is wrong with the one-line text of `field`, as a message that does not repeat it: that it shows
    nothing (see has_visible_text; an `optional` field may be empty instead), or the first character it may not
    hold (see unsafe_text); None when nothing is."""
    if (text or not optional) and not has_visible_text(text):
        return f"the {field} {_SHOWS_NOTHING}"
    return unsafe_text(text)


class ExampleSides(Protocol):
    """Text around a gap, as a usage example gives it."""

    @property
    def left(self) -> str: ...

    @property
    def right(self) -> str: ...


def check_quote_input(record: QuoteRecord, examples: Sequence[ExampleSides] = ()) -> None:
    """Refuse a quote to list, as given (before its white space is stripped), with the API's rules: its text
    shows nothing, its source or gloss holds something but shows nothing, or one of them or of the usage
    examples' sides holds a character no text may (see unsafe_text; examples may have several lines). An
    InputError naming the field: quote, source, gloss or examples."""
    fields = (("quote", record.text, False), ("source", record.source, True), ("gloss", record.gloss, True))
    for field, text, optional in fields:
        problem = text_problem(text, field, optional=optional)
        if problem is not None:
            raise InputError(problem, field=field)
    for number, example in enumerate(examples, start=1):
        for side, text in (("left", example.left), ("right", example.right)):
            problem = unsafe_text(text, multiline=True)
            if problem is not None:
                raise InputError(f"{problem} (usage example {number}, {side})", field="examples")
