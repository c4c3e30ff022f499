"""Which usage examples are written: each context once, at most a few per quote with their files spread, and
how many each rule adds."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from quoter.datasets.mining.usage import UsageExample
from quoter.datasets.mining.usage_forms import RULES
from quoter.tables import markdown_table

RULE_RANK = {rule: rank for rank, rule in enumerate(RULES)}


@dataclass(frozen=True)
class RuleRow:
    """What the rules up to and including `rule` give together, and what `rule` adds to those before it."""

    rule: str
    added: int  # distinct contexts
    contexts: int
    written: int  # at most the cap per quote
    quotes_with_one: int
    quotes_with_three: int


def by_rule(example: UsageExample) -> tuple[int, str, int]:
    """Sort key: the strictest rule first, then by file and line."""
    return RULE_RANK[example.rule], example.file, example.line


def distinct_examples(examples: list[UsageExample]) -> list[UsageExample]:
    """Each (left, quote, right) once: the one found by the strictest rule, then the first by file and line;
    none without any context, which says nothing of how the quote is used."""
    seen: set[tuple[str, int, str]] = set()
    kept = []
    for example in sorted(examples, key=by_rule):
        key = (example.left, example.quote_id, example.right)
        if key not in seen and (example.left or example.right):
            seen.add(key)
            kept.append(example)
    return kept


def choose_examples(examples: list[UsageExample], cap: int) -> list[UsageExample]:
    """At most `cap` examples per quote, by quote, file and line: first each file's best example (strictest
    rule, then first line), strictest rule and file name first, then each file's second best, and so on."""
    rounds: Counter[tuple[int, str]] = Counter()
    ranked = []
    for example in sorted(examples, key=lambda e: (e.quote_id, *by_rule(e))):
        ranked.append(((example.quote_id, rounds[example.quote_id, example.file], *by_rule(example)), example))
        rounds[example.quote_id, example.file] += 1
    chosen: list[UsageExample] = []
    per_quote: Counter[int] = Counter()
    for _, example in sorted(ranked, key=lambda item: item[0]):
        if per_quote[example.quote_id] < cap:
            per_quote[example.quote_id] += 1
            chosen.append(example)
    return sorted(chosen, key=lambda e: (e.quote_id, e.file, e.line, e.left, e.right))


def rule_table(examples: list[UsageExample], rules: tuple[str, ...], cap: int) -> list[RuleRow]:
    """One row per rule that ran, in order: the distinct examples of that rule and the ones before it."""
    rows = []
    for index, rule in enumerate(rules):
        so_far = [example for example in examples if example.rule in rules[: index + 1]]
        counts = Counter(example.quote_id for example in so_far)
        added = sum(example.rule == rule for example in so_far)
        written = sum(min(count, cap) for count in counts.values())
        with_three = sum(count >= 3 for count in counts.values())
        rows.append(RuleRow(rule, added, len(so_far), written, len(counts), with_three))
    return rows


def render_rule_table(rows: list[RuleRow], quotes: int, cap: int) -> str:
    """The rule table as Markdown, each row counting the rules up to it; `quotes`: how many the bank has."""
    headers = (
        "rule",
        "contexts added",
        "contexts",
        f"written (at most {cap} a quote)",
        "quotes with ≥1",
        "quotes with ≥3",
    )
    return markdown_table(
        headers,
        [
            (
                row.rule,
                f"+{row.added:,}",
                f"{row.contexts:,}",
                f"{row.written:,}",
                f"{row.quotes_with_one:,} of {quotes:,}",
                f"{row.quotes_with_three:,}",
            )
            for row in rows
        ],
    )
