"""Chinese text sent without `lang` to a server hosting both Chinese banks: the routing by function words it
had (one bank: classical when the text has more classical function words than modern ones, else modern)
against what it does now, both banks ranked and merged by standing (quoter/serving/chinese_merge.py).

    python -m benchmarks.chinese_routing [--rankers [zero-shot] [hybrid]] [--no-writers-check]

Contexts, each written around a quote of one bank (its intended quote):
  zh-modern, zh-classical  the dev sets' test splits (`make -C data zh-modern zh-classical`). The two banks are
                           the two sets' quote lists, each ranked by a ranker built over it as `quoter evaluate`
                           builds it: zero-shot (`--method encoder --gloss`: the default model, native pooling,
                           quotes read with their glosses) or hybrid (`--method hybrid --gloss`, fitted on the
                           set's valid split);
  writer's check           tests/data/writers_check/zh.jsonl and zh-classical.jsonl, hand-written contexts for
                           bank quotes, against the built-in default's two banks, ranked by their bundles.
For each group of contexts and each answer: how often the first answer comes from the intended quote's bank,
how often the intended quote is in the top 3, and its MRR over the answer's whole list (a context routed to
the other bank counts 0). `raw merge`, both banks by their own scores, shows what the standing is for.
About 20 minutes on 2 CPU cores, 12 of them the hybrid rankers; the writer's check alone (`--rankers`) takes
seconds once the default's learned values are cached.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quoter.datasets import load_dataset
from quoter.languages import CLASSICAL_MARKERS, MODERN_MARKERS, Language
from quoter.methods import MethodOptions, build_ranker
from quoter.metrics import ranks_from_scores
from quoter.ranking import Query
from quoter.serving.chinese_merge import standing
from quoter.tables import markdown_table

REPO = Path(__file__).resolve().parent.parent
MODERN, CLASSICAL = Language.ZH, Language.ZH_CLASSICAL
BANKS = (MODERN, CLASSICAL)
DEV_SETS = {
    MODERN: REPO / "data" / "built" / "zh-modern" / "data.txt",
    CLASSICAL: REPO / "data" / "built" / "zh-classical" / "data.txt",
}
WRITERS_CHECK = REPO / "tests" / "data" / "writers_check"
RANKERS = {"zero-shot": "encoder", "hybrid": "hybrid"}


@dataclass(frozen=True)
class Group:
    """Contexts whose intended quotes are all in one bank, with every quote of both banks scored for them."""

    name: str
    ranker: str
    texts: list[str]
    scores: dict[Language, np.ndarray]  # each bank's own scores: (contexts, the bank's quotes)
    bank: Language  # the bank of the intended quotes
    gold: np.ndarray  # each intended quote's place in its bank


def routed_to_classical(text: str) -> bool:
    """Where the server sent Chinese text before: to the classical bank when it has more classical function
    words than modern ones."""
    return sum(char in CLASSICAL_MARKERS for char in text) > sum(char in MODERN_MARKERS for char in text)


def answers(group: Group) -> dict[str, np.ndarray]:
    """Each answer's scores over both banks' quotes (modern first), -inf for quotes it leaves out."""
    modern, classical = group.scores[MODERN], group.scores[CLASSICAL]
    routed = np.array([routed_to_classical(text) for text in group.texts])[:, None]
    return {
        "routing (before)": np.hstack([np.where(routed, -np.inf, modern), np.where(routed, classical, -np.inf)]),
        "raw merge": np.hstack([modern, classical]),
        "merged by standing (now)": np.hstack([standing(modern), standing(classical)]),
    }


def figures(group: Group, answer: np.ndarray) -> list[str]:
    """How often the first answer is of the intended bank, the intended quote in the top 3, and its MRR."""
    modern_quotes = group.scores[MODERN].shape[1]
    columns = group.gold + (modern_quotes if group.bank is CLASSICAL else 0)
    first_classical = answer.argmax(axis=1) >= modern_quotes
    right_bank = first_classical == (group.bank is CLASSICAL)
    ranks = ranks_from_scores(answer, columns).astype(np.float64)
    ranks[np.isneginf(answer[np.arange(len(columns)), columns])] = np.inf
    return [f"{right_bank.mean():.1%}", f"{np.mean(ranks <= 3):.1%}", f"{np.mean(1.0 / ranks):.3f}"]


def dev_groups(ranker: str) -> list[Group]:
    """The two dev sets' test contexts, each ranked in both sets' quote lists by rankers of this kind."""
    if missing := [path for path in DEV_SETS.values() if not path.is_file()]:
        print(f"{missing[0]} is missing; build it with `make -C data {missing[0].parent.name}`")
        return []
    datasets = {bank: load_dataset(path, glosses=path.parent / "glosses.tsv") for bank, path in DEV_SETS.items()}
    tests = {bank: dataset.split("test") for bank, dataset in datasets.items()}
    queries = [Query(sample.left, sample.right) for bank in BANKS for sample in tests[bank]]
    scores = {}
    for bank, dataset in datasets.items():
        scores[bank] = build_ranker(RANKERS[ranker], dataset, MethodOptions(lang=bank, gloss=True)).score(queries)
        print(f"{ranker} {DEV_SETS[bank].parent.name}: scored", flush=True)
    names = {bank: f"{path.parent.name} test" for bank, path in DEV_SETS.items()}
    gold = {bank: np.array([sample.quote_id for sample in tests[bank]]) for bank in BANKS}
    return grouped(names, ranker, queries, scores, gold)


def writers_groups() -> list[Group]:
    """The writer's check of each Chinese bank, ranked in both banks of the built-in default."""
    from quoter.hybrid_bundle import bundle_ranker
    from quoter.serving.hosting import default_bundles

    bundles = default_bundles(BANKS)
    checks = {bank: read_checks(WRITERS_CHECK / f"{bank.value}.jsonl") for bank in BANKS}
    queries = [Query(check["left"], check["right"]) for bank in BANKS for check in checks[bank]]
    scores = {bundle.language: bundle_ranker(bundle).score(queries) for bundle in bundles}
    gold = {}
    for bundle in bundles:
        place = {quote.text: number for number, quote in enumerate(bundle.quotes)}
        gold[bundle.language] = np.array([place[check["quote"]] for check in checks[bundle.language]])
    names = {bank: f"writer's check {bank.value}" for bank in BANKS}
    return grouped(names, "built-in default", queries, scores, gold)


def grouped(
    names: dict[Language, str],
    ranker: str,
    queries: Sequence[Query],
    scores: dict[Language, np.ndarray],
    gold: dict[Language, np.ndarray],
) -> list[Group]:
    """The contexts of both banks, scored together (the modern bank's first), as one group a bank."""
    groups, start = [], 0
    for bank in BANKS:
        rows = slice(start, start + len(gold[bank]))
        start = rows.stop
        texts = [query.left + query.right for query in queries[rows]]
        groups.append(Group(names[bank], ranker, texts, {b: m[rows] for b, m in scores.items()}, bank, gold[bank]))
    return groups


def read_checks(path: Path) -> list[dict[str, str]]:
    """The hand-written contexts of a writer's check file: {"left", "right", "quote"} a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def table(groups: Sequence[Group]) -> str:
    """Every group's figures under every answer."""
    rows = [
        [group.name, str(len(group.texts)), group.ranker, name, *figures(group, answer)]
        for group in groups
        for name, answer in answers(group).items()
    ]
    headers = ["contexts", "n", "ranker", "answer", "first answer's bank right", "intended in top 3", "MRR"]
    return markdown_table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--rankers", nargs="*", default=list(RANKERS), choices=list(RANKERS), help="of the dev sets; none: skip them"
    )
    parser.add_argument("--no-writers-check", action="store_true", help="skip the writer's check")
    args = parser.parse_args()
    groups = [group for ranker in args.rankers for group in dev_groups(ranker)]
    if not args.no_writers_check:
        groups += writers_groups()
    print("\nChinese contexts without lang, both Chinese banks hosted:\n")
    print(table(groups))


if __name__ == "__main__":
    main()
