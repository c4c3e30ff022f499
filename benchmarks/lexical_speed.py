"""How fast the lexical baselines rank a split against a large quote set (a benchmark, not a test).

    python -m benchmarks.lexical_speed [--quotes 10000] [--contexts 5000] [--repeats 3]

Builds a synthetic dataset with Zipf-distributed words (so no data files are needed), then times
building each method and ranking every test context against the full quote set. Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from quoter.atomic_files import write_json_atomic, write_text_atomic
from quoter.baselines.crm import Aggregate
from quoter.datasets import load_dataset
from quoter.evaluation import evaluate
from quoter.languages import Language
from quoter.methods import MethodOptions, build_ranker
from quoter.tables import markdown_table


def synthetic_dataset(folder: Path, n_quotes: int, n_test: int, train_per_quote: int, seed: int = 0) -> Path:
    """A QuoteR file whose quotes (8 words) and contexts (40 words a side) draw words from a Zipf law."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(30_000)])

    def words(n: int) -> str:
        return " ".join(vocabulary[np.minimum(rng.zipf(1.3, n), len(vocabulary)) - 1])

    quotes = [words(8) + f" q{i}" for i in range(n_quotes)]
    train = [(words(40), q, words(40)) for q in quotes for _ in range(train_per_quote)]
    test = [(words(40), quotes[rng.integers(n_quotes)], words(40)) for _ in range(n_test)]
    rows = train + test
    path = folder / "synthetic.txt"
    write_text_atomic(path, "".join(f"{l}\t{q}\t{r}\n" for l, q, r in rows))
    write_json_atomic(
        folder / "synthetic.splits.json",
        {"train": [0, len(train)], "valid": [len(train), len(train)], "test": [len(train), len(rows)]},
    )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quotes", type=int, default=10_000)
    parser.add_argument("--contexts", type=int, default=5_000, help="test contexts to rank")
    parser.add_argument("--train-per-quote", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        dataset = load_dataset(synthetic_dataset(Path(folder), args.quotes, args.contexts, args.train_per_quote))
    rows = []
    for method, aggregate in (("bm25", Aggregate.SUM), ("crm", Aggregate.SUM), ("crm", Aggregate.MAX)):
        build_times, rank_times = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            ranker = build_ranker(method, dataset, MethodOptions(lang=Language.EN, crm_aggregate=aggregate))
            built = time.perf_counter()
            evaluate(ranker, dataset, "test", method)
            build_times.append(built - started)
            rank_times.append(time.perf_counter() - built)
        rank_median = statistics.median(rank_times)
        name = method if method == "bm25" else f"{method} ({aggregate.value})"
        build_median = statistics.median(build_times)
        rows.append([name, f"{build_median:.2f}", f"{rank_median:.2f}", f"{args.contexts / rank_median:,.0f}"])
    print(
        f"{args.quotes:,} quotes, {args.quotes * args.train_per_quote:,} training contexts, "
        f"{args.contexts:,} test contexts; medians of {args.repeats} runs"
    )
    print(markdown_table(["method", "build s", "rank all test contexts s", "contexts/s"], rows))


if __name__ == "__main__":
    main()
