"""Every setting of the dataset builder, with the paper's defaults per language, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quoter.errors import QuoterError
from quoter.languages import Language

# Section 4 of the QuoteR paper: 40 words (English) or 50 characters (Chinese) of context on each side,
# quotes kept with at least 5 (English) or 3 (Chinese) occurrences, at most 200 / 150 contexts per quote.
CONTEXT_UNITS = {Language.EN: 40, Language.ZH: 50, Language.ZH_CLASSICAL: 50}
MIN_OCCURRENCES = {Language.EN: 5, Language.ZH: 3, Language.ZH_CLASSICAL: 3}
MAX_CONTEXTS = {Language.EN: 200, Language.ZH: 150, Language.ZH_CLASSICAL: 150}
# A partial quotation (some but not all sentences of a quote) must be this long to count: shorter
# fragments ("I do not know.") are everyday phrases rather than quotations.
MIN_PARTIAL_UNITS = {Language.EN: 8, Language.ZH: 4, Language.ZH_CLASSICAL: 4}


def per_language(values: dict[Language, int]) -> str:
    """A per-language default as the command line's help shows it: '40 (en) / 50 (zh, zh-classical)'."""
    languages: dict[int, list[str]] = {}
    for language, value in values.items():
        languages.setdefault(value, []).append(language.value)
    return " / ".join(f"{value} ({', '.join(names)})" for value, names in languages.items())


@dataclass(frozen=True)
class BuildConfig:
    """What to build from, where to, and every rule of the construction (see `for_language`)."""

    language: Language
    quote_files: tuple[Path, ...]
    corpus_paths: tuple[Path, ...]
    out_dir: Path
    example_files: tuple[Path, ...] = ()
    sources_file: Path | None = None
    # The per-language rules; `for_language` sets them for the configured language.
    context_units: int = CONTEXT_UNITS[Language.EN]
    min_occurrences: int = MIN_OCCURRENCES[Language.EN]
    max_contexts: int = MAX_CONTEXTS[Language.EN]
    min_partial_units: int = MIN_PARTIAL_UNITS[Language.EN]
    seed: int = 13
    valid_fraction: float = 0.1
    test_fraction: float = 0.1
    zero_shot_quotes: int = 100
    # Small sets get fewer zero-shot quotes: about this share of all quotes at most.
    max_zero_shot_fraction: float = 0.05
    traditional_to_simplified: bool = False
    strip_gutenberg: bool = True
    # A quote found in more than this share of the corpus documents is a formulaic phrase, not a quotation.
    max_document_frequency: float = 0.5
    # Below this many documents a document frequency says nothing, and the cap is not applied.
    min_documents_for_frequency_cap: int = 20
    use_stanza: bool = True
    progress: bool = True
    # Corpus files are read in blocks of about this many characters, so one huge file never sits in memory.
    block_chars: int = 1_000_000
    example_placeholder: str = "～"
    example_attribution_mark: str = "★"

    @classmethod
    def for_language(cls, language: Language, **settings: object) -> BuildConfig:
        """A configuration with the paper's defaults for `language`; `settings` override any field."""
        defaults = {
            "context_units": CONTEXT_UNITS[language],
            "min_occurrences": MIN_OCCURRENCES[language],
            "max_contexts": MAX_CONTEXTS[language],
            "min_partial_units": MIN_PARTIAL_UNITS[language],
        }
        given = {name: value for name, value in settings.items() if value is not None}
        config = cls(language=language, **{**defaults, **given})  # type: ignore[arg-type]
        config.check()
        return config

    @property
    def is_chinese(self) -> bool:
        """Chinese contexts and matching work on characters, English on words."""
        return self.language in (Language.ZH, Language.ZH_CLASSICAL)

    def check(self) -> None:
        """Reject settings that cannot give a valid dataset, with a message that says why."""
        if not self.quote_files and not self.example_files:
            raise QuoterError("give at least one quote list (--quotes) or examples file (--examples)")
        if self.context_units < 1:
            raise QuoterError("the context size must be at least 1")
        # Every kept quote must be able to appear in train, valid and test.
        if self.min_occurrences < 3:
            raise QuoterError("the minimum number of occurrences must be at least 3 (one each for train, valid, test)")
        if self.max_contexts < self.min_occurrences:
            raise QuoterError("the cap on contexts per quote must not be below the minimum number of occurrences")
        if not (
            0 < self.valid_fraction < 1 and 0 < self.test_fraction < 1 and self.valid_fraction + self.test_fraction < 1
        ):
            raise QuoterError("valid and test fractions must be between 0 and 1 and leave room for train")
        if self.zero_shot_quotes < 0 or not 0 <= self.max_zero_shot_fraction <= 1:
            raise QuoterError("the zero-shot quote count must be >= 0 and its fraction between 0 and 1")
        if not 0 < self.max_document_frequency <= 1:
            raise QuoterError("the document-frequency cap must be in (0, 1]")
        if not self.example_placeholder:
            raise QuoterError("the example placeholder must not be empty")
