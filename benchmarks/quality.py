"""Recommendation quality on every development set, in one run (a benchmark, not a test).

    python -m benchmarks.quality [--split test|valid] [--sets en zh-modern zh-classical example bank-en
                                 bank-zh bank-zh-classical]
                                 [--methods bm25 crm mask native native+gloss plain hybrid hybrid-rrf]
                                 [--bank-methods bm25 crm native+gloss plain zero-shot-dense default-dense
                                                 default default-unseen]
                                 [--bundle zh-classical=bundles/zh-classical ...] [--gap-markers]

For each set (built by `make -C data en|zh-modern|zh-classical`; `example` is the built-in example set) it
prints MRR, R@1 and R@10 over the full quote set of:
  bm25, crm            the lexical baselines;
  mask                 the zero-shot encoder read the paper's way ([MASK] for contexts, [CLS] for quotes);
  native               the zero-shot encoder with the model's native pooling (mean, cosine, e5 prompts);
  native+gloss         the same, each quote read with its gloss (the set's glosses.tsv);
  hybrid, hybrid-rrf   native+gloss fused with bm25 (over quote, gloss and source), crm and knn (the encoder's
                       vectors of the train contexts), by z-scores or reciprocal ranks, the weights fitted on
                       the valid split (`quoter evaluate --method hybrid`);
  trained,             with --bundle SET=DIR (a bundle `quoter train` wrote from SET's train split): its dense
  trained+fusion       score alone, and its saved fusion with bm25, crm and knn (the shipped method);
  plain                an independent baseline written here with plain transformers on the same model:
                       mean pooling, cosine, e5 prompts for e5, the gap written as '___'.
Where the set has a candidate file (zh-modern: candidates.jsonl), multiple-choice accuracy too. Every set is
measured with both sides of the gap and with its left side alone ("SET, left only").

The bank sets (bank-en, bank-zh, bank-zh-classical) are the built-in banks measured on their held-back real
usage examples (quote_bank/usage/), which nothing is fitted on: held back by source, whole books and records
of the idiom dictionary (quoter/datasets/mining/usage_file.py), so no book lends lines to both sides; CRM reads
the bank's fit examples (written, and the real ones not held back); `default` is the default server's ranking
(quoter/default_bundles.py) and `default-dense` its dense score alone (quote vectors pulled towards their
examples, nothing fused); `zero-shot-dense` is the default's encoders before they learn anything, and
`default-unseen` the default learned without any example of the held-back examples' quotes, as a quote added
without examples is placed (it should be no worse than zero-shot-dense). Each bank set is measured with both
sides of the gap and with its left side alone (autocomplete, "SET, left only"), and a last table gives the
default's MRR over the plain baseline's.
`--gap-markers` adds native with each gap marker (what stands in the gap of a mean-pooled context).

Then the writer's check: hand-written contexts for quotes of the built-in bank (tests/data/writers_check/),
ranked by the default server's recommender; it prints how often the intended quote is in the top 3 and how
many distinct quotes are ranked first (and the largest share of contexts one quote is first for).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from quoter.bundle import Bundle
from quoter.datasets import QuoteDataset, load_dataset
from quoter.datasets.example_set import EXAMPLE_DATA
from quoter.default_bundles import default_bundles, learned_bundle
from quoter.encoders.model_sources import default_model, resolve_model
from quoter.encoders.pooling import GapMarker, PoolingChoice
from quoter.evaluation import evaluate
from quoter.evaluation.candidates import read_candidates
from quoter.fusion import FusionRule
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.methods import MethodOptions, build_ranker
from quoter.quote_bank import load_quote_bank
from quoter.quote_bank.usage import BankUsage, bank_usage, usage_path
from quoter.ranking import Query, Ranker
from quoter.tables import markdown_table

REPO = Path(__file__).resolve().parent.parent
BUILT = REPO / "data" / "built"
WRITERS_CHECK = REPO / "tests" / "data" / "writers_check"
SETS = {
    "en": (BUILT / "en" / "data.txt", Language.EN),
    "zh-modern": (BUILT / "zh-modern" / "data.txt", Language.ZH),
    "zh-classical": (BUILT / "zh-classical" / "data.txt", Language.ZH_CLASSICAL),
    "example": (EXAMPLE_DATA, Language.EN),
}
# The built-in bank of each language, measured on its held-back real usage examples (quote_bank/usage.py).
BANK_SETS = {f"bank-{language.value}": language for language in Language}
METHODS = ("bm25", "crm", "mask", "native", "native+gloss", "plain", "hybrid", "hybrid-rrf")
# On the bank sets: train is the bank's fit examples (written, and real ones not held back), test the
# held-back real ones; `default` is the default server's ranking, `default-dense` its dense score alone (the
# quote vectors pulled towards their examples, without BM25, CRM and knn), the others are as above.
BANK_METHODS = ("bm25", "crm", "native+gloss", "plain", "zero-shot-dense", "default-dense", "default", "default-unseen")
# The default's own encoders and window before it learns anything (`zero-shot-dense`), and the default learned
# without any example of the held-back examples' quotes (`default-unseen`), which places those quotes as a quote
# added without examples is placed: it should rank them at least as well as zero-shot-dense does.
LEARNING_METHODS = ("zero-shot-dense", "default-dense", "default", "default-unseen")
TRAINED_METHODS = ("trained", "trained+fusion")
E5_MODELS = ("offline:me5-small",)


class PlainMeanPooling:
    """The baseline a user would write: transformers' AutoModel, mean over the attention mask, cosine."""

    def __init__(self, model_name: str, quotes: Sequence[str], batch_size: int = 64) -> None:
        from transformers import AutoModel, AutoTokenizer

        folder = resolve_model(model_name)
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()
        self.e5 = model_name in E5_MODELS
        self.batch_size = batch_size
        self.quote_vectors = self.embed([("passage: " if self.e5 else "") + q for q in quotes])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=128,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                mean = (hidden * mask).sum(1) / mask.sum(1)
                vectors.append(torch.nn.functional.normalize(mean, dim=-1).numpy())
        return np.concatenate(vectors) if vectors else np.zeros((0, self.model.config.hidden_size), np.float32)

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        prefix = "query: " if self.e5 else ""
        texts = [f"{prefix}{q.left} ___ {q.right}".strip() for q in queries]
        return self.embed(texts) @ self.quote_vectors.T


@dataclass(frozen=True)
class Row:
    """One method's figures on one set."""

    data_set: str
    method: str
    metrics: dict[str, float]


def build(method: str, dataset: QuoteDataset, language: Language, gap: GapMarker | None, bundle: str | None) -> Ranker:
    """The ranker of a benchmark method over the dataset's (candidate-extended) quote set."""
    if method in TRAINED_METHODS:
        options = MethodOptions(lang=language, bundle=bundle, dense_only=method == "trained")
        return build_ranker("bundle", dataset, options)
    if method in ("bm25", "crm"):
        return build_ranker(method, dataset, MethodOptions(lang=language))
    if method == "plain":
        return PlainMeanPooling(default_model(language), dataset.quotes)
    pooling = PoolingChoice.MASK if method == "mask" else PoolingChoice.NATIVE
    gloss = method in ("native+gloss", "hybrid", "hybrid-rrf")
    fusion = FusionRule.RRF if method == "hybrid-rrf" else FusionRule.ZSCORE
    options = MethodOptions(lang=language, pooling=pooling, gap=gap, gloss=gloss, fusion=fusion)
    return build_ranker("hybrid" if method.startswith("hybrid") else "encoder", dataset, options)


def bank_set(language: Language) -> QuoteDataset:
    """The built-in bank of `language` as a dataset: its fit examples in train, the held-back real ones in
    test (and valid, empty)."""
    quotes = load_quote_bank(language)
    usage = bank_usage(language, quotes)
    fit, held = len(usage.fit), len(usage.held_back)
    return QuoteDataset(
        path=usage_path(language, "real"),
        quotes=[record.text for record in quotes],
        samples=usage.fit + usage.held_back,
        splits={"train": (0, fit), "valid": (fit, fit), "test": (fit, fit + held)},
        details={record.text: record for record in quotes},
    )


def run_bank_set(name: str, methods: Sequence[str]) -> list[Row]:
    """The bank methods on one bank's held-back real examples, with both sides of the gap and with its left
    side alone."""
    language = BANK_SETS[name]
    dataset = bank_set(language)
    if not dataset.split("test"):
        print(f"{name}: no held-back real examples; mine them with `make -C data usage`")
        return []
    default = None
    rows = []
    for method in methods:
        if method in LEARNING_METHODS:
            if default is None:
                [default] = default_bundles([language])
                info = default.info
                print(
                    f"{name} default: {default.fusion.describe()}, pull {info['usage_pull']:g}, cross-fitted MRR "
                    f"{info['usage_fit_mrr']:.3f} on {info['usage_examples']} examples"
                )
            ranker = bundle_ranker(learning_stage(default, method))
        else:
            ranker = build(method, dataset, language, None, None)
        for label, left_only in ((name, False), (f"{name}, left only", True)):
            report = evaluate(ranker, dataset, "test", method, left_only=left_only)
            rows.append(Row(label, method, report.overall))
            print(f"{label} {method}: MRR {report.overall['mrr']:.3f}", flush=True)
    return rows


def learning_stage(default: Bundle, method: str) -> Bundle:
    """The bundle of one of LEARNING_METHODS, from the default bundle of a bank."""
    if method == "default":
        return default
    if method == "default-dense":
        return replace(default, fusion=None)
    quotes = load_quote_bank(default.language)
    usage = bank_usage(default.language, quotes)
    if method == "zero-shot-dense":
        usage = BankUsage([], [], usage.held_back)
    else:
        unseen = {sample.quote_id for sample in usage.held_back}
        kept = [row for row, sample in enumerate(usage.fit) if sample.quote_id not in unseen]
        usage = BankUsage([usage.fit[row] for row in kept], [usage.fit_real[row] for row in kept], usage.held_back)
    return learned_bundle(replace(default, fusion=None, known_contexts=[], known_vectors=None), quotes, usage)


def default_over_plain(rows: Sequence[Row]) -> list[list[str]]:
    """For each set measured with both the default and the plain baseline: their MRRs and the ratio."""
    mrr = {(row.data_set, row.method): row.metrics["mrr"] for row in rows}
    sets = dict.fromkeys(row.data_set for row in rows)
    return [
        [data_set, f"{mrr[data_set, 'plain']:.3f}", f"{mrr[data_set, 'default']:.3f}"]
        + [f"{mrr[data_set, 'default'] / mrr[data_set, 'plain']:.2f}x"]
        for data_set in sets
        if (data_set, "plain") in mrr and (data_set, "default") in mrr
    ]


def run_set(name: str, methods: Sequence[str], split: str, gap_markers: bool, bundle: str | None) -> list[Row]:
    """Every method on one set, with both sides of the gap and with its left side alone, and the trained methods
    when a bundle is given for it; a set that is not built is skipped with a note."""
    path, language = SETS[name]
    if not path.is_file():
        print(f"{name}: {path} is missing; build it with `make -C data {name}`")
        return []
    glosses = path.parent / "glosses.tsv"
    dataset = load_dataset(path, glosses=glosses if glosses.is_file() else None)
    candidate_file = path.parent / "candidates.jsonl"
    candidates = read_candidates(candidate_file, dataset) if candidate_file.is_file() and split == "test" else None
    runs = [(method, None) for method in methods]
    if bundle is not None:
        runs += [(method, None) for method in TRAINED_METHODS]
    if gap_markers:
        runs += [("native", marker) for marker in GapMarker]
    rows = []
    for method, gap in runs:
        ranker = build(method, dataset, language, gap, bundle)
        label = method if gap is None else f"native, gap {gap.value}"
        for set_label, left_only in ((name, False), (f"{name}, left only", True)):
            report = evaluate(ranker, dataset, split, method, left_only=left_only, candidates=candidates)
            rows.append(Row(set_label, label, {**report.overall, **report.candidate_metrics()}))
            print(f"{set_label} {label}: MRR {report.overall['mrr']:.3f}", flush=True)
    return rows


def writers_check(languages: Sequence[Language]) -> list[list[str]]:
    """The default server's top-3 rate and first-place spread on the hand-written contexts."""
    from quoter.serving.recommender import Recommender

    rows = []
    for bundle in default_bundles(languages):
        path = WRITERS_CHECK / f"{bundle.language.value}.jsonl"
        checks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        results = Recommender(bundle).recommend([Query(c["left"], c["right"]) for c in checks], k=3)
        top3 = sum(c["quote"] in [found.record.text for found in top] for c, top in zip(checks, results))
        firsts = Counter(top[0].record.text for top in results)
        most = firsts.most_common(1)[0][1]
        rows.append(
            [
                bundle.language.value,
                str(len(checks)),
                f"{top3 / len(checks):.1%}",
                str(len(firsts)),
                f"{most / len(checks):.1%}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="test", choices=["test", "valid"])
    parser.add_argument("--sets", nargs="+", default=[*SETS, *BANK_SETS], choices=[*SETS, *BANK_SETS])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--bank-methods", nargs="+", default=list(BANK_METHODS), choices=list(BANK_METHODS))
    parser.add_argument("--gap-markers", action="store_true", help="add native with each gap marker")
    parser.add_argument("--no-writers-check", action="store_true", help="skip the writer's check")
    parser.add_argument(
        "--bundle", action="append", default=[], metavar="SET=DIR", help="add a bundle trained on SET's train split"
    )
    args = parser.parse_args()
    bundles = dict(spec.split("=", 1) for spec in args.bundle)
    if unknown := set(bundles) - set(SETS):
        parser.error(f"--bundle: unknown set(s) {', '.join(sorted(unknown))}; known: {', '.join(SETS)}")
    rows = [
        row
        for name in args.sets
        for row in (
            run_bank_set(name, args.bank_methods)
            if name in BANK_SETS
            else run_set(name, args.methods, args.split, args.gap_markers, bundles.get(name))
        )
    ]
    table = [
        [
            row.data_set,
            row.method,
            f"{row.metrics['mrr']:.3f}",
            f"{100 * row.metrics['recall@1']:.1f}",
            f"{100 * row.metrics['recall@10']:.1f}",
            f"{100 * row.metrics['candidate_accuracy']:.1f}" if "candidate_accuracy" in row.metrics else "",
        ]
        for row in rows
    ]
    print(f"\nZero-shot and lexical methods, {args.split} split, full quote set:\n")
    print(markdown_table(["set", "method", "MRR", "R@1", "R@10", "multiple choice %"], table))
    if ratios := default_over_plain(rows):
        print("\nThe default server against the plain baseline (MRR):\n")
        print(markdown_table(["set", "plain", "default", "default / plain"], ratios))
    if not args.no_writers_check:
        print("\nWriter's check, default server (built-in bank):\n")
        headers = ["language", "contexts", "intended quote in top 3", "distinct first quotes", "most common first"]
        print(markdown_table(headers, writers_check(list(Language))))


if __name__ == "__main__":
    main()
