"""Mine real usage examples of the built-in bank quotes: where each was cited in a corpus or in an idiom
dictionary's examples, with the file and line, and the rule (usage_forms) that found it.

The search is the dataset builder's: one Aho-Corasick automaton over the normalised text (matcher), sentence
finds joined into occurrences and resolved (occurrences), corpus files read in blocks without Project
Gutenberg boilerplate (corpus), quotes not counted inside their own source work (sources), and contexts cut
as the builder cuts them. Chinese is searched twice: as written, then with the quotes and the text in one
script and one form of the variant characters; the second search adds only what the first did not find.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from quoter.datasets.mining.chinese_script import traditional_to_simplified
from quoter.datasets.mining.config import CONTEXT_UNITS, MIN_PARTIAL_UNITS
from quoter.datasets.mining.corpus import Block, CorpusFile, block_margin, corpus_files, read_blocks
from quoter.datasets.mining.matcher import QuoteMatcher
from quoter.datasets.mining.matching_text import MatchingForm
from quoter.datasets.mining.occurrences import ContextCutter, Quotation, search_text
from quoter.datasets.mining.quote_lists import ExampleSentence, cited_text, read_examples
from quoter.datasets.mining.sentences import choose_splitter
from quoter.datasets.mining.sources import SelfCitations, read_sources
from quoter.datasets.mining.usage_forms import RULES, SearchForm, fold_variants, search_forms, variant_forms
from quoter.languages import Language
from quoter.progress import progress_bar
from quoter.quote_list import read_quote_tsv
from quoter.quote_record import QuoteRecord

# A first clause shorter than this (words in English, characters in Chinese) is too common to be a citation:
# "When I was a child" is in 16 of the 233 English books, and four-character clauses (战战兢兢, 居安思危,
# 四海之内) are idioms or stock phrases in their own right.
MIN_CLAUSE_UNITS = {Language.EN: 6, Language.ZH: 5, Language.ZH_CLASSICAL: 5}


@dataclass(frozen=True)
class UsageConfig:
    """What to search for which bank, and every rule of the search (see `for_language`)."""

    language: Language
    bank_file: Path
    corpus_paths: tuple[Path, ...]
    examples_file: Path | None = None
    sources_files: tuple[Path, ...] = ()
    traditional_to_simplified: bool = False
    context_units: int = CONTEXT_UNITS[Language.EN]
    min_partial_units: int = MIN_PARTIAL_UNITS[Language.EN]
    min_clause_units: int = MIN_CLAUSE_UNITS[Language.EN]
    # At most this many examples per quote are written, so that the usage files stay small.
    max_examples: int = 12
    progress: bool = True
    block_chars: int = 1_000_000
    example_placeholder: str = "～"
    example_attribution_mark: str = "★"

    @classmethod
    def for_language(cls, language: Language, **settings: object) -> UsageConfig:
        """A configuration with the builder's context size and partial-occurrence minimum for `language`."""
        defaults = {
            "context_units": CONTEXT_UNITS[language],
            "min_partial_units": MIN_PARTIAL_UNITS[language],
            "min_clause_units": MIN_CLAUSE_UNITS[language],
        }
        return cls(language=language, **{**defaults, **settings})  # type: ignore[arg-type]

    @property
    def is_chinese(self) -> bool:
        """Chinese is matched and cut on characters, and searched a second time for variants."""
        return self.language in (Language.ZH, Language.ZH_CLASSICAL)


@dataclass(frozen=True)
class UsageExample:
    """Bank quote `quote_id` cited between `left` and `right`, at `line` of `file`, found by `rule`."""

    left: str
    quote_id: int
    right: str
    file: str
    line: int
    rule: str


@dataclass(frozen=True)
class MinedUsage:
    """Every usage example found (duplicates included), the rules that ran, and what was searched."""

    quotes: list[QuoteRecord]
    rules: tuple[str, ...]
    examples: list[UsageExample]
    corpus_bytes: int
    seconds: float


@dataclass(frozen=True)
class SearchPass:
    """One search of all the text: the automaton of the forms, how text is converted as it is read (contexts
    are cut from that) and folded for matching only, and the rule its finds count for (None: the form's)."""

    matcher: QuoteMatcher
    convert: Callable[[str], str] | None = None
    fold: Callable[[str], str] | None = None
    rule: str | None = None

    def read(self, text: str) -> str:
        """`text` as this pass reads it."""
        return self.convert(text) if self.convert else text

    def matched(self, text: str) -> str:
        """The text this pass matches for `text` as read: the same length, so offsets hold in both."""
        return self.fold(text) if self.fold else text


def search_passes(config: UsageConfig, form: MatchingForm, forms: list[SearchForm]) -> list[SearchPass]:
    """The text as written, then, for Chinese, in one script and one form of the variant characters."""
    passes = [SearchPass(QuoteMatcher(form, [list(search_form.sentences) for search_form in forms]))]
    if config.is_chinese:
        convert = traditional_to_simplified() if config.traditional_to_simplified else None
        folded = [list(search_form.sentences) for search_form in variant_forms(forms, convert)]
        passes.append(SearchPass(QuoteMatcher(form, folded), convert, fold_variants, "variant"))
    return passes


def mine_usage(config: UsageConfig) -> MinedUsage:
    """Search the corpus and the examples file for every quote of the bank, by every rule of the language."""
    started = time.perf_counter()
    quotes = read_quote_tsv(config.bank_file)
    form = MatchingForm(chinese=config.is_chinese)
    split = choose_splitter(config.language, use_stanza=False).split  # the same sentences on every machine
    forms = search_forms([quote.text for quote in quotes], split, form, config.min_clause_units)
    passes = search_passes(config, form, forms)
    documents = corpus_files(config.corpus_paths)
    # Every input is read before the long search, so that a bad line stops the command at once.
    examples = read_examples(config.examples_file, config.example_attribution_mark)[1] if config.examples_file else []
    search = UsageSearch(config, form, quotes, forms)
    search.search_documents(documents, passes)
    if config.examples_file is not None:
        search.search_examples(config.examples_file, examples, passes)
    corpus_bytes = sum(document.size for document in documents)
    return MinedUsage(quotes, rules_run(config), search.found, corpus_bytes, time.perf_counter() - started)


def rules_run(config: UsageConfig) -> tuple[str, ...]:
    """The rules that run, in order: variant for Chinese only, idiom-example only with an examples file."""
    skipped = {"variant": not config.is_chinese, "idiom-example": config.examples_file is None}
    return tuple(rule for rule in RULES if not skipped.get(rule, False))


def shown_path(path: Path) -> str:
    """A file as the usage file names it: relative to the working directory when it is under it."""
    absolute = path.absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


class UsageSearch:
    """The passes over the corpus and the examples, collecting every usage example they find."""

    def __init__(
        self, config: UsageConfig, form: MatchingForm, quotes: list[QuoteRecord], forms: list[SearchForm]
    ) -> None:
        self.config = config
        self.form = form
        self.quotes = quotes
        self.forms = forms
        self.cutter = ContextCutter(config.context_units, config.is_chinese)
        file_sources: dict[str, list[str]] = {}
        for path in config.sources_files:
            for name, sources in read_sources(path).items():
                file_sources.setdefault(name, []).extend(sources)
        self.self_citations = SelfCitations(file_sources, [quotes[f.quote_id].source for f in forms])
        self.margin = block_margin(max(len(quote.text) for quote in quotes))
        self.found: list[UsageExample] = []

    def search_documents(self, documents: list[CorpusFile], passes: list[SearchPass]) -> None:
        """Search every corpus file with every pass, with a progress bar on a terminal."""
        total = len(passes) * sum(document.size for document in documents)
        with progress_bar(
            total=total, unit="B", unit_scale=True, desc="searching corpus", enabled=self.config.progress
        ) as progress:
            for document in documents:
                excluded = self.self_citations.excluded_quotes(document.path)
                file = shown_path(document.path)
                earlier: set[tuple[int, int]] = set()
                for search_pass in passes:
                    blocks = read_blocks(
                        document,
                        self.config.block_chars,
                        self.margin,
                        strip_gutenberg=True,
                        convert=search_pass.convert,
                    )
                    found = [
                        example
                        for block in blocks
                        for example in self.block_examples(block, search_pass, excluded, file)
                    ]
                    self.keep_new(found, earlier)
                    progress.update(document.size)

    def block_examples(
        self, block: Block, search_pass: SearchPass, excluded: frozenset[int], file: str
    ) -> list[UsageExample]:
        """The examples of the occurrences that start in the block's emit range."""
        found = search_text(
            search_pass.matched(block.text),
            search_pass.matcher,
            self.config.min_partial_units,
            excluded,
            block.emit_start,
            block.emit_end,
        )
        return [
            self.example(block.text, quotation, search_pass, file, block.line_at(quotation.start))
            for quotation in found.kept
        ]

    def example(self, text: str, quotation: Quotation, search_pass: SearchPass, file: str, line: int) -> UsageExample:
        """The usage example of one quotation that a pass found in `text`."""
        search_form = self.forms[quotation.occurrence.quote_id]
        rule = search_pass.rule or search_form.rule(quotation.occurrence.complete)
        left, right = self.cutter.around(text, quotation.start, quotation.end)
        return UsageExample(left, search_form.quote_id, right, file, line, rule)

    def keep_new(self, examples: list[UsageExample], earlier: set[tuple[int, int]]) -> None:
        """Keep the examples of a pass whose quote no earlier pass found on their line (`earlier`: (quote, line)
        of those), and add theirs."""
        new = [example for example in examples if (example.quote_id, example.line) not in earlier]
        self.found.extend(new)
        earlier.update((example.quote_id, example.line) for example in new)

    def search_examples(self, path: Path, examples: list[ExampleSentence], passes: list[SearchPass]) -> None:
        """The idiom dictionary's example sentences: every bank quote written out in them (the corpus rules),
        and the bank quote where `～` stands for it (idiom-example)."""
        file = shown_path(path)
        bank_ids = {self.form.normalise(quote.text): quote_id for quote_id, quote in enumerate(self.quotes)}
        for example in examples:
            earlier: set[tuple[int, int]] = set()
            for search_pass in passes:
                self.keep_new(self.written_out(example, search_pass, file), earlier)
            quote_id = bank_ids.get(self.form.normalise(example.quote.text))
            if quote_id is not None:
                self.found.extend(self.idiom_examples(example, quote_id, file))

    def written_out(self, example: ExampleSentence, search_pass: SearchPass, file: str) -> list[UsageExample]:
        """The bank quotes a pass finds written out in an example sentence, with its own quote where `～` stands
        (not one of them: `～` cites the record's quote, and that is the idiom-example rule's)."""
        text, cited = cited_text(
            search_pass.read(example.text), self.config.example_placeholder, search_pass.read(example.quote.text)
        )
        found = search_text(search_pass.matched(text), search_pass.matcher, self.config.min_partial_units)
        return [
            self.example(text, quotation, search_pass, file, example.line)
            for quotation in found.kept
            if not any(quotation.start < end and start < quotation.end for start, end in cited)
        ]

    def idiom_examples(self, example: ExampleSentence, quote_id: int, file: str) -> list[UsageExample]:
        """Bank quote `quote_id` where `～` stands for it in its own record's example sentence."""
        text, cited = cited_text(example.text, self.config.example_placeholder, self.quotes[quote_id].text)
        found = []
        for start, end in cited:
            left, right = self.cutter.around(text, start, end)
            found.append(UsageExample(left, quote_id, right, file, example.line, "idiom-example"))
        return found
