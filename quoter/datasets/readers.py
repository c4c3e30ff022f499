"""Read QuoteR files (`left<TAB>quote<TAB>right` per line) and JSONL files ({"left", "quote", "right"})."""

from __future__ import annotations

from pathlib import Path

from quoter.datasets.dataset import QuoteDataset, Sample
from quoter.datasets.splits import official_splits, read_splits_file
from quoter.errors import InputError
from quoter.quote_list import read_quote_tsv
from quoter.quote_record import has_visible_text
from quoter.text_lines import check_text, decoded_lines, json_object

JSONL_SUFFIXES = (".jsonl", ".json")


def _parse_tsv_line(text: str, path: Path, number: int) -> tuple[str, str, str]:
    fields = text.split("\t")
    if len(fields) != 3:
        raise InputError(
            f"expected 3 tab-separated fields (left, quote, right), found {len(fields)}", path=path, line=number
        )
    left, quote, right = fields
    return left, quote, right


def _parse_jsonl_line(text: str, path: Path, number: int) -> tuple[str, str, str]:
    record = json_object(text, path, number, 'a JSON object {"left", "quote", "right"}')
    values = []
    for field in ("left", "quote", "right"):
        value = record.get(field, "")
        if not isinstance(value, str):
            raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=number, field=field)
        values.append(check_text(value, path, number, field))
    left, quote, right = values
    return left, quote, right


def read_samples(path: str | Path) -> tuple[list[str], list[Sample]]:
    """Read every sample of a QuoteR TSV or JSONL file (by suffix); return (quote set, samples).

    Quotes are compared after trimming surrounding white space; contexts are kept as written.
    """
    path = Path(path)
    parse = _parse_jsonl_line if path.suffix.lower() in JSONL_SUFFIXES else _parse_tsv_line
    quote_ids: dict[str, int] = {}
    samples: list[Sample] = []
    for number, text in decoded_lines(path, "data file"):
        left, quote, right = parse(text, path, number)
        quote = quote.strip()
        if not has_visible_text(quote):
            message = "the quote is empty (no letter, number, punctuation mark or symbol)"
            raise InputError(message, path=path, line=number, field="quote")
        quote_id = quote_ids.setdefault(quote, len(quote_ids))
        samples.append(Sample(left=left, quote_id=quote_id, right=right, line=number))
    if not samples:
        raise InputError("the data file has no samples", path=path)
    return list(quote_ids), samples


def sidecar_splits_path(path: str | Path) -> Path | None:
    """The splits JSON that belongs to a data file: `NAME.splits.json`, else `splits.json` beside it."""
    path = Path(path)
    for candidate in (path.with_name(path.stem + ".splits.json"), path.with_name("splits.json")):
        if candidate.is_file():
            return candidate
    return None


def load_dataset(
    path: str | Path, splits: str | Path | None = None, part: str | None = None, glosses: str | Path | None = None
) -> QuoteDataset:
    """Load a dataset with its splits from a splits JSON, an official part name, or a sidecar file.

    With neither `splits` nor `part`, a sidecar splits file is used if there is one; otherwise the
    dataset has no splits (enough for statistics of the whole file). `glosses` names a quote list
    (`quote<TAB>source[<TAB>gloss]`) that gives the dataset's quotes their sources and glosses.
    """
    if splits is not None and part is not None:
        raise InputError("give either a splits JSON or an official part name, not both")
    path = Path(path)
    quotes, samples = read_samples(path)
    details = {} if glosses is None else {r.text: r for r in read_quote_tsv(glosses, require_source=False)}
    dataset = QuoteDataset(path=path, quotes=quotes, samples=samples, details=details)
    if part is not None:
        dataset.splits, dataset.splits_source = official_splits(part, len(samples), path), f"official part '{part}'"
    else:
        splits_path = Path(splits) if splits is not None else sidecar_splits_path(path)
        if splits_path is not None:
            dataset.splits, dataset.splits_source = read_splits_file(splits_path, len(samples)), str(splits_path)
    return dataset
