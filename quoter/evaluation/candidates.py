"""Multiple-choice evaluation: for some contexts, a short list of candidate quotes (the gold one and
distractors of similar meaning or form, as in the ChID idiom benchmark); a context counts as right when its
gold quote outscores every other candidate.

The candidate file is JSON lines `{"line": N, "candidates": [quote, ...]}`, N the 0-based line of the data
file. Candidates need not belong to the data file's quote set: those quotes are added to the set for this
evaluation only, after all of the file's own quotes, and full-set ranks never count them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quoter.datasets import QuoteDataset, Sample
from quoter.errors import InputError
from quoter.metrics import ranks_from_scores
from quoter.text_lines import decoded_lines, json_object


@dataclass(frozen=True)
class Candidates:
    """Candidate quote ids per sample (by the sample's 0-based data line); `full_set` is the number of the
    data file's own quotes, which full-set metrics rank among."""

    by_line: dict[int, np.ndarray]
    full_set: int

    def correct(self, samples: list[Sample], scores: np.ndarray) -> np.ndarray:
        """For each sample that has candidates, whether its gold quote scores above all its other candidates
        (ties count against it); `scores` are the samples' scores over the extended quote set."""
        right = []
        for sample, row in zip(samples, scores):
            ids = self.by_line.get(sample.line - 1)
            if ids is not None:
                gold = int(np.flatnonzero(ids == sample.quote_id)[0])
                right.append(ranks_from_scores(row[ids][None, :], [gold])[0] == 1)
        return np.array(right, dtype=bool)


def read_candidates(path: Path, dataset: QuoteDataset) -> Candidates:
    """Read a candidate file for `dataset`, appending the candidate quotes it lacks to its quote set. Every
    line must name a line of the file once, list the gold quote of that line among at least two distinct
    candidates; a bad line is reported with its number."""
    full_set = len(dataset.quotes)
    quote_ids = {quote: index for index, quote in enumerate(dataset.quotes)}
    by_line: dict[int, np.ndarray] = {}
    for number, text in decoded_lines(path, "candidate file"):
        if not text.strip():
            continue
        data_line, candidates = _parse_line(text, path, number)
        if not 0 <= data_line < len(dataset.samples):
            raise InputError(f"line {data_line} is not a line of {dataset.path}", path, number, "line")
        if data_line in by_line:
            raise InputError(f"line {data_line} has candidates already", path, number, "line")
        if len(set(candidates)) != len(candidates) or len(candidates) < 2:
            raise InputError("expected at least two distinct candidates", path, number, "candidates")
        gold = dataset.quotes[dataset.samples[data_line].quote_id]
        if gold not in candidates:
            raise InputError(f"the gold quote of line {data_line} ('{gold}') is not a candidate", path, number)
        for quote in candidates:
            if quote not in quote_ids:
                quote_ids[quote] = len(dataset.quotes)
                dataset.quotes.append(quote)
        by_line[data_line] = np.array([quote_ids[quote] for quote in candidates], dtype=np.int64)
    if not by_line:
        raise InputError("no candidates in the candidate file", path)
    return Candidates(by_line, full_set)


def _parse_line(text: str, path: Path, number: int) -> tuple[int, list[str]]:
    item = json_object(text, path, number, 'a JSON object {"line": N, "candidates": [...]}')
    data_line, candidates = item.get("line"), item.get("candidates")
    if isinstance(data_line, bool) or not isinstance(data_line, int):
        raise InputError("expected the 0-based line number of the data file", path, number, "line")
    if not isinstance(candidates, list) or not all(isinstance(c, str) and c.strip() for c in candidates):
        raise InputError("expected a list of non-empty quote texts", path, number, "candidates")
    return data_line, [c.strip() for c in candidates]
