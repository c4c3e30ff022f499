"""The dataset builder: quote lists and a corpus in, a QuoteR dataset with splits and statistics out."""

from __future__ import annotations

import json
import random
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from quoter.atomic_files import check_output_folder, write_folder_atomic
from quoter.datasets import dataset_stats, load_dataset, render_stats
from quoter.datasets.mining.chinese_script import traditional_to_simplified
from quoter.datasets.mining.config import BuildConfig
from quoter.datasets.mining.corpus import Block, block_margin, corpus_files, read_blocks
from quoter.datasets.mining.matcher import QuoteMatcher
from quoter.datasets.mining.matching_text import MatchingForm
from quoter.datasets.mining.occurrences import ContextCutter, search_text
from quoter.datasets.mining.quote_lists import (
    ExampleSentence,
    QuoteEntry,
    cited_text,
    read_examples,
    read_quote_list,
)
from quoter.datasets.mining.report import BuildReport
from quoter.datasets.mining.selection import (
    Pair,
    PairCollector,
    Split,
    cap_pairs,
    formulaic_quotes,
    split_pairs,
    zero_shot_count,
)
from quoter.datasets.mining.sentences import choose_splitter
from quoter.datasets.mining.sources import SelfCitations, read_sources
from quoter.errors import QuoterError
from quoter.progress import progress_bar

OUTPUT_FILES = ("data.txt", "splits.json", "stats.md")


@dataclass(frozen=True)
class QuoteSet:
    """The distinct quotes to search, their sentences, and the example sentences that cite them."""

    quotes: list[QuoteEntry]
    sentences: list[list[str]]
    examples: list[tuple[int, str]]  # (quote id, example sentence with the placeholder)


def build_dataset(config: BuildConfig) -> BuildReport:
    """Build a QuoteR dataset as section 4 of the paper does and write it to `config.out_dir`."""
    started = time.perf_counter()
    check_out_dir(config.out_dir)
    splitter = choose_splitter(config.language, config.use_stanza)
    report = BuildReport(language=config.language.value, splitter=splitter.description, seed=config.seed)
    convert = traditional_to_simplified() if config.traditional_to_simplified else None
    form = MatchingForm(chinese=config.is_chinese)
    quote_set = read_quote_set(config, form, splitter.split, convert, report)
    matcher = QuoteMatcher(form, quote_set.sentences)
    report.sentence_patterns = matcher.pattern_count
    collector = PairCollector()
    search = CorpusSearch(config, matcher, quote_set.quotes, collector, report, convert)
    search.run()
    search.add_examples(quote_set.examples)
    report.duplicate_pairs = collector.duplicates
    split = select_and_split(config, collector, quote_set.quotes, report)
    report.seconds = time.perf_counter() - started
    report.peak_memory_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_outputs(config, split, quote_set.quotes, report)
    return report


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output folder that holds anything but an earlier build's files, which are replaced."""
    check_output_folder(out_dir, "--out", "an earlier build's " + ", ".join(OUTPUT_FILES), _not_build_files)


def _not_build_files(folder: Path) -> list[str]:
    """What `folder` holds besides an earlier build's files."""
    return sorted(path.name for path in folder.iterdir() if path.name not in OUTPUT_FILES)


def read_quote_set(
    config: BuildConfig,
    form: MatchingForm,
    split_sentences: Callable[[str], list[str]],
    convert: Callable[[str], str] | None,
    report: BuildReport,
) -> QuoteSet:
    """Read the quote lists and examples, merge quotes with the same normalised text, split into sentences."""
    entries: list[QuoteEntry] = []
    examples: list[ExampleSentence] = []
    for path in config.quote_files:
        entries.extend(read_quote_list(path))
    for path in config.example_files:
        quotes, sentences = read_examples(path, config.example_attribution_mark)
        entries.extend(quotes)
        examples.extend(sentence for sentence in sentences if config.example_placeholder in sentence.text)
    if convert is not None:
        entries = [replace(entry, text=convert(entry.text), source=convert(entry.source)) for entry in entries]
        examples = [
            replace(e, quote=replace(e.quote, text=convert(e.quote.text)), text=convert(e.text)) for e in examples
        ]
    report.quote_entries = len(entries)
    ids: dict[str, int] = {}
    quotes: list[QuoteEntry] = []
    sentences: list[list[str]] = []
    for entry in entries:
        key = form.normalise(entry.text)
        if not key:
            report.unsearchable_quotes += 1
            continue
        if key in ids:
            report.duplicate_quotes += 1
            continue
        ids[key] = len(quotes)
        quotes.append(entry)
        sentences.append(form.searchable(entry.text, split_sentences(entry.text)))
    report.quotes = len(quotes)
    report.example_sentences = len(examples)
    example_pairs = [
        (ids[form.normalise(e.quote.text)], e.text) for e in examples if form.normalise(e.quote.text) in ids
    ]
    return QuoteSet(quotes, sentences, example_pairs)


class CorpusSearch:
    """One pass over the corpus (and the example sentences) that collects context-quote pairs."""

    def __init__(
        self,
        config: BuildConfig,
        matcher: QuoteMatcher,
        quotes: list[QuoteEntry],
        collector: PairCollector,
        report: BuildReport,
        convert: Callable[[str], str] | None,
    ) -> None:
        self.config = config
        self.matcher = matcher
        self.quotes = quotes
        self.collector = collector
        self.report = report
        self.convert = convert
        self.cutter = ContextCutter(config.context_units, config.is_chinese)
        file_sources = read_sources(config.sources_file) if config.sources_file is not None else {}
        self.self_citations = SelfCitations(file_sources, [quote.source for quote in quotes])
        self.margin = block_margin(max((len(quote.text) for quote in quotes), default=0))

    def run(self) -> None:
        """Search every corpus file, block by block, with a progress bar on a terminal."""
        if not self.config.corpus_paths:
            return
        documents = corpus_files(self.config.corpus_paths)
        self.report.documents = len(documents)
        self.report.corpus_bytes = sum(document.size for document in documents)
        marked = set(self.self_citations.marked_files())
        self.report.marked_documents = sum(document.path.name in marked for document in documents)
        started = time.perf_counter()
        with progress_bar(
            total=self.report.corpus_bytes,
            unit="B",
            unit_scale=True,
            desc="searching corpus",
            enabled=self.config.progress,
        ) as progress:
            for document in documents:
                excluded = self.self_citations.excluded_quotes(document.path)
                counted = 0
                blocks = read_blocks(
                    document, self.config.block_chars, self.margin, self.config.strip_gutenberg, self.convert
                )
                for block in blocks:
                    self.search_block(block, excluded)
                    progress.update(block.bytes_read)
                    counted += block.bytes_read
                progress.update(max(0, document.size - counted))  # boilerplate and line ends not counted above
        self.report.search_seconds = time.perf_counter() - started

    def search_block(self, block: Block, excluded: frozenset[int]) -> None:
        """Collect the pairs of the occurrences that start in the block's emit range."""
        for start, end, quote_id in self.occurrences_in(block.text, excluded, block.emit_start, block.emit_end):
            self.add_pair(block.text, start, end, quote_id, block.document.document_id)

    def occurrences_in(
        self, text: str, excluded: frozenset[int], emit_start: int = 0, emit_end: int | None = None
    ) -> list[tuple[int, int, int]]:
        """Occurrences that start in [emit_start, emit_end) of `text`, as (start, end, quote id) in the original,
        with the candidates dropped counted in the report."""
        found = search_text(text, self.matcher, self.config.min_partial_units, excluded, emit_start, emit_end)
        self.report.self_citations += found.self_citations
        self.report.ambiguous += found.ambiguous
        self.report.overlapped += found.overlapped
        return [(quotation.start, quotation.end, quotation.occurrence.quote_id) for quotation in found.kept]

    def add_pair(self, text: str, start: int, end: int, quote_id: int, document_id: int) -> None:
        """Cut the contexts of one occurrence and collect the pair, unless it has no context at all."""
        self.report.occurrences += 1
        left, right = self.cutter.around(text, start, end)
        if not left and not right:
            self.report.no_context += 1
            return
        self.collector.add(Pair(left, quote_id, right, document_id))

    def add_examples(self, examples: list[tuple[int, str]]) -> None:
        """Example sentences: the cited quote where the placeholder stands, and any other quote found in them."""
        for quote_id, sentence in examples:
            text, cited = cited_text(sentence, self.config.example_placeholder, self.quotes[quote_id].text)
            for start, end in cited:
                self.add_pair(text, start, end, quote_id, document_id=-1)
            for start, end, other_id in self.occurrences_in(text, frozenset()):
                if not any(start < c_end and c_start < end for c_start, c_end in cited):
                    self.add_pair(text, start, end, other_id, document_id=-1)


def select_and_split(
    config: BuildConfig, collector: PairCollector, quotes: list[QuoteEntry], report: BuildReport
) -> Split:
    """Drop formulaic and rare quotes, cap the contexts per quote, and split (all with the seed)."""
    rng = random.Random(config.seed)
    pairs = dict(sorted(collector.pairs.items()))
    formulaic = formulaic_quotes(
        collector.documents, report.documents, config.max_document_frequency, config.min_documents_for_frequency_cap
    )
    report.document_frequency_cap = (
        f"in more than {config.max_document_frequency:.0%} of {report.documents:,} documents"
        if report.documents >= config.min_documents_for_frequency_cap
        else f"not applied: fewer than {config.min_documents_for_frequency_cap} documents"
    )
    report.formulaic = sorted(
        ((quotes[q].text, count) for q, count in formulaic.items()), key=lambda item: (-item[1], item[0])
    )
    kept: dict[int, list[Pair]] = {}
    for quote_id, quote_pairs in pairs.items():
        if quote_id in formulaic:
            continue
        if len(quote_pairs) < config.min_occurrences:
            report.rare_quotes += 1
            report.rare_pairs += len(quote_pairs)
            continue
        capped = cap_pairs(quote_pairs, config.max_contexts, rng)
        report.capped_pairs += len(quote_pairs) - len(capped)
        kept[quote_id] = capped
    if not kept:
        raise QuoterError(
            f"no quote was found at least {config.min_occurrences} times in the corpus; nothing to build "
            "(a larger corpus or a lower --min-occurrences may help)"
        )
    zero_shot = zero_shot_count(len(kept), config.zero_shot_quotes, config.max_zero_shot_fraction)
    split = split_pairs(kept, config.valid_fraction, config.test_fraction, zero_shot, rng)
    report.pairs = sum(len(p) for p in kept.values())
    report.kept_quotes = len(kept)
    report.zero_shot = len(split.zero_shot)
    return split


def write_outputs(config: BuildConfig, split: Split, quotes: list[QuoteEntry], report: BuildReport) -> None:
    """Write data.txt, splits.json and stats.md; the output folder appears complete or not at all."""
    out_dir = config.out_dir

    def build(folder: Path) -> None:
        lines = [
            f"{pair.left}\t{quotes[pair.quote_id].text}\t{pair.right}\n"
            for part in (split.train, split.valid, split.test)
            for pair in part
        ]
        (folder / "data.txt").write_text("".join(lines), encoding="utf-8")
        train_end, valid_end = len(split.train), len(split.train) + len(split.valid)
        splits = {
            "train": [0, train_end],
            "valid": [train_end, valid_end],
            "test": [valid_end, len(lines)],
            "seed": config.seed,
            "zero_shot_quotes": len(split.zero_shot),
        }
        (folder / "splits.json").write_text(json.dumps(splits, indent=2) + "\n", encoding="utf-8")
        # Reading the written files back checks them with the foundation's own reader.
        stats = dataset_stats(load_dataset(folder / "data.txt", splits=folder / "splits.json"))
        stats = replace(stats, name=str(out_dir / "data.txt"))
        (folder / "stats.md").write_text(f"{render_stats(stats)}\n\n{report.render()}\n", encoding="utf-8")

    write_folder_atomic(out_dir, build)
