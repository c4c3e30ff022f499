"""Turn sentence matches into quote occurrences, and cut their contexts from the original text."""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from quoter.datasets.mining.matcher import QuoteMatcher, SentenceMatch
from quoter.datasets.mining.matching_text import MatchText

WHITESPACE = re.compile(r"\s+")
ENGLISH_UNIT = re.compile(r"\S+")
CHINESE_UNIT = re.compile(r"\S")
# Punctuation right after a quotation belongs to it, not to the right context.
CLOSING_PUNCTUATION = re.compile(r"[.,;:!?。，；：！？、…]+")


@dataclass(frozen=True)
class Occurrence:
    """Quote `quote_id` cited at [start, end) of a normalised text, as sentences first..last of it."""

    quote_id: int
    start: int
    end: int
    units: int
    complete: bool  # every sentence of the quote, in order


@dataclass(frozen=True)
class Resolution:
    """The occurrences kept in a text, and the candidates dropped, by reason."""

    kept: list[Occurrence]
    ambiguous: list[Occurrence]  # the same span fits several quotes, none of them completely
    overlapped: list[Occurrence]  # inside or across a longer occurrence of another quote


@dataclass
class _Run:
    """Consecutive sentences of one quote found one after another, growing as matches come in."""

    quote_id: int
    first_sentence: int
    next_sentence: int
    start: int
    end: int
    units: int


def assemble(matches: list[SentenceMatch], matcher: QuoteMatcher, min_partial_units: int) -> list[Occurrence]:
    """Join sentence matches of one quote that follow each other in order into one occurrence.

    A run that covers the whole quote always counts; a partial one only with `min_partial_units` or more.
    """
    separator = len(matcher.form.separator)
    open_runs: dict[int, list[_Run]] = {}  # per quote, the runs that the next match may still extend
    runs: list[_Run] = []
    for match in matches:
        units = matcher.pattern_units[match.pattern_id]
        for owner in matcher.pattern_owners[match.pattern_id]:
            candidates = open_runs.setdefault(owner.quote_id, [])
            extended = False
            for run in candidates:
                if run.next_sentence == owner.index and run.end + separator == match.start:
                    run.next_sentence, run.end, run.units = owner.index + 1, match.end, run.units + units
                    extended = True
            if not extended:
                run = _Run(owner.quote_id, owner.index, owner.index + 1, match.start, match.end, units)
                candidates.append(run)
                runs.append(run)
            # Matches come by position: a run that ends before this one starts can no longer grow.
            candidates[:] = [run for run in candidates if run.end + separator >= match.start]
    occurrences = []
    for run in runs:
        complete = run.first_sentence == 0 and run.next_sentence == matcher.sentence_counts[run.quote_id]
        if complete or run.units >= min_partial_units:
            occurrences.append(Occurrence(run.quote_id, run.start, run.end, run.units, complete))
    return occurrences


def resolve(occurrences: list[Occurrence]) -> Resolution:
    """Keep the longest occurrences that do not overlap one another.

    Where one span fits several quotes, it goes to the quote it covers completely; if that does not
    decide (a shared partial sentence), the span is ambiguous and dropped.
    """
    by_span: dict[tuple[int, int], list[Occurrence]] = {}
    for occurrence in occurrences:
        by_span.setdefault((occurrence.start, occurrence.end), []).append(occurrence)
    starts: list[int] = []
    ends: list[int] = []
    kept: list[Occurrence] = []
    ambiguous: list[Occurrence] = []
    overlapped: list[Occurrence] = []
    for (start, end), candidates in sorted(by_span.items(), key=lambda item: (item[0][0] - item[0][1], item[0][0])):
        at = bisect_left(starts, start)
        if (at < len(starts) and starts[at] < end) or (at > 0 and ends[at - 1] > start):
            overlapped.extend(candidates)
            continue
        complete = [c for c in candidates if c.complete]
        if len(candidates) == 1:
            chosen = candidates[0]
        elif len(complete) == 1:
            chosen = complete[0]
            overlapped.extend(c for c in candidates if c is not chosen)
        else:
            ambiguous.append(candidates[0])
            continue
        starts.insert(at, start)
        ends.insert(at, end)
        kept.append(chosen)
    kept.sort(key=lambda occurrence: occurrence.start)
    return Resolution(kept, ambiguous, overlapped)


@dataclass(frozen=True)
class Quotation:
    """An occurrence kept in a text, at [start, end) of the original text."""

    occurrence: Occurrence
    start: int
    end: int


@dataclass(frozen=True)
class TextSearch:
    """The occurrences kept in one text, and how many candidates were dropped, by reason."""

    kept: list[Quotation]
    self_citations: int
    ambiguous: int
    overlapped: int


def search_text(
    text: str,
    matcher: QuoteMatcher,
    min_partial_units: int,
    excluded: frozenset[int] = frozenset(),
    emit_start: int = 0,
    emit_end: int | None = None,
) -> TextSearch:
    """The occurrences of the quotes (but the `excluded` ones) that start in [emit_start, emit_end) of `text`.

    Candidates are resolved over the whole text, so that the overlap of two blocks is decided the same way in
    both; only those in the emit range are returned and counted.
    """
    match_text = matcher.form.match_text(text)
    low = match_text.normalised_position(emit_start)
    high = match_text.normalised_position(len(text) if emit_end is None else emit_end)

    def emitted(occurrences: list[Occurrence]) -> list[Occurrence]:
        return [o for o in occurrences if low <= o.start < high]

    candidates = assemble(matcher.find(match_text), matcher, min_partial_units)
    self_citations = len(emitted([c for c in candidates if c.quote_id in excluded]))
    resolution = resolve([c for c in candidates if c.quote_id not in excluded])
    kept = [Quotation(o, *original_span(match_text, o)) for o in emitted(resolution.kept)]
    return TextSearch(kept, self_citations, len(emitted(resolution.ambiguous)), len(emitted(resolution.overlapped)))


def original_span(match_text: MatchText, occurrence: Occurrence) -> tuple[int, int]:
    """The [start, end) of an occurrence in the original text."""
    return match_text.original_position(occurrence.start), match_text.original_position(occurrence.end - 1) + 1


class ContextCutter:
    """Cut `size` words (English) or non-space characters (Chinese) on each side of a quotation."""

    def __init__(self, size: int, chinese: bool) -> None:
        self.size = size
        self.unit = CHINESE_UNIT if chinese else ENGLISH_UNIT
        # A first guess of how many characters hold `size` units; doubled until enough are found.
        self.chars_per_unit = 2 if chinese else 8

    def left(self, text: str, end: int, floor: int = 0) -> str:
        """The `size` units before `end` (never before `floor`), white space collapsed."""
        span = self.size * self.chars_per_unit
        while True:
            begin = max(floor, end - span)
            units = list(self.unit.finditer(text, begin, end))
            # One unit more than needed proves that the first one kept is whole, not cut by `begin`.
            if len(units) > self.size or begin == floor:
                break
            span *= 2
        if not units:
            return ""
        first = units[-self.size] if len(units) >= self.size else units[0]
        return WHITESPACE.sub(" ", text[first.start() : end]).strip()

    def right(self, text: str, start: int, ceiling: int | None = None) -> str:
        """The `size` units from `start` on (never past `ceiling`), white space collapsed."""
        ceiling = len(text) if ceiling is None else ceiling
        span = self.size * self.chars_per_unit
        while True:
            stop = min(ceiling, start + span)
            units = list(self.unit.finditer(text, start, stop))
            if len(units) > self.size or stop == ceiling:
                break
            span *= 2
        if not units:
            return ""
        last = units[min(self.size, len(units)) - 1]
        return WHITESPACE.sub(" ", text[start : last.end()]).strip()

    def around(self, text: str, start: int, end: int) -> tuple[str, str]:
        """The left and right contexts of a quotation at [start, end); the punctuation closing it is in neither."""
        return self.left(text, start), self.right(text, quotation_end(text, end))


def quotation_end(text: str, end: int) -> int:
    """The end of a quotation in the original text, with the punctuation that closes it."""
    closing = CLOSING_PUNCTUATION.match(text, end)
    return closing.end() if closing else end
