"""What a build did, step by step, for the output and for stats.md."""

from __future__ import annotations

from dataclasses import dataclass, field

from quoter.tables import markdown_table

# How many of the formulaic quotes a report names.
FORMULAIC_SHOWN = 10


@dataclass
class BuildReport:
    """Counts of every step of a build, filled in as it runs."""

    language: str
    splitter: str
    seed: int
    quote_entries: int = 0
    duplicate_quotes: int = 0
    unsearchable_quotes: int = 0
    quotes: int = 0
    sentence_patterns: int = 0
    example_sentences: int = 0
    documents: int = 0
    marked_documents: int = 0
    corpus_bytes: int = 0
    search_seconds: float = 0.0
    occurrences: int = 0
    self_citations: int = 0
    ambiguous: int = 0
    overlapped: int = 0
    no_context: int = 0
    duplicate_pairs: int = 0
    document_frequency_cap: str = ""
    formulaic: list[tuple[str, int]] = field(default_factory=list)
    rare_quotes: int = 0
    rare_pairs: int = 0
    capped_pairs: int = 0
    pairs: int = 0
    kept_quotes: int = 0
    zero_shot: int = 0
    seconds: float = 0.0
    peak_memory_mb: float = 0.0

    @property
    def megabytes_per_second(self) -> float:
        """Corpus bytes searched per second of the corpus pass (MB = 10^6 bytes)."""
        return self.corpus_bytes / 1e6 / self.search_seconds if self.search_seconds > 0 else 0.0

    def render(self) -> str:
        """The report as a Markdown section."""
        rows = [
            ["sentence splitter", self.splitter],
            ["quotes read (list rows and example records)", f"{self.quote_entries:,}"],
            ["duplicate quotes (same normalised text) merged", f"{self.duplicate_quotes:,}"],
            ["quotes with nothing to search (no letters)", f"{self.unsearchable_quotes:,}"],
            ["quotes searched / distinct sentence patterns", f"{self.quotes:,} / {self.sentence_patterns:,}"],
            ["example sentences", f"{self.example_sentences:,}"],
            ["corpus documents (marked as sources)", f"{self.documents:,} ({self.marked_documents:,})"],
            ["corpus size", f"{self.corpus_bytes / 1e6:,.1f} MB"],
            ["corpus search", f"{self.search_seconds:,.1f} s, {self.megabytes_per_second:,.2f} MB/s"],
            ["occurrences found (corpus and examples)", f"{self.occurrences:,}"],
            ["dropped: found in their own source work", f"{self.self_citations:,}"],
            ["dropped: span fits several quotes, none completely", f"{self.ambiguous:,}"],
            ["dropped: inside or across a longer occurrence", f"{self.overlapped:,}"],
            ["dropped: no context on either side", f"{self.no_context:,}"],
            ["dropped: duplicate pairs", f"{self.duplicate_pairs:,}"],
            [f"dropped: formulaic quotes ({self.document_frequency_cap})", f"{len(self.formulaic):,}"],
            ["dropped: quotes below the minimum (their pairs)", f"{self.rare_quotes:,} ({self.rare_pairs:,})"],
            ["dropped: pairs over the cap per quote", f"{self.capped_pairs:,}"],
            ["kept: pairs / quotes / zero-shot quotes", f"{self.pairs:,} / {self.kept_quotes:,} / {self.zero_shot:,}"],
            ["seed", str(self.seed)],
            ["build time", f"{self.seconds:,.1f} s"],
            ["peak memory (max RSS of the process)", f"{self.peak_memory_mb:,.0f} MB"],
        ]
        parts = ["## Build report", "", f"Language: {self.language}", "", markdown_table(["step", "value"], rows)]
        if self.formulaic:
            shown = self.formulaic[:FORMULAIC_SHOWN]
            parts += [
                "",
                f"Formulaic quotes dropped (most widespread {len(shown)} of {len(self.formulaic)}):",
                "",
                markdown_table(
                    ["quote", "documents"], [[text.replace("|", "\\|"), f"{count:,}"] for text, count in shown]
                ),
            ]
        return "\n".join(parts)
