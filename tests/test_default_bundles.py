"""The built-in default learns from the bank's usage examples: CRM and knn read them, quote vectors move towards
them, the fusion is cross-fitted on them, and what it learned is cached."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import quoter.default_bundles as default_bundles
from quoter.datasets import Sample
from quoter.default_bundle_cache import cache_path
from quoter.default_bundles import balanced_weights, folds_of, learned_bundle, recipe, usage_vectors
from quoter.errors import InputError
from quoter.fusion import FusionRule
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.quote_bank import load_quote_bank
from quoter.quote_bank.usage import BankUsage, bank_usage, read_usage_file
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from tests.serving_fixtures import QUOTES, tiny_bundle

EXAMPLES = [
    Sample("the cat sat", 0, "on a mat", 1),
    Sample("a dog ran", 1, "home", 2),
    Sample("the cat", 0, "sat on the mat .", 3),
    Sample("happy , happy", 2, "the dog", 4),
    Sample("a dog", 1, "ran home", 5),
    Sample("happy dog", 2, "", 6),
]
REAL = [False, False, False, True, True, True]


@pytest.fixture
def base(tmp_path):
    """A tiny bundle's encoders without quotes, as default_bundles starts from."""
    bundle = tiny_bundle(tmp_path)
    return replace(bundle, quotes=[], quote_vectors=bundle.quote_vectors[:0])


def test_a_default_with_examples_is_hybrid_over_them(base):
    quotes = QUOTES[Language.EN]
    bundle = learned_bundle(base, quotes, BankUsage(EXAMPLES, REAL, []))
    assert bundle.fusion is not None and bundle.fusion.weights["dense"] == 1.0
    assert bundle.known_contexts == EXAMPLES and bundle.known_vectors.shape == (len(EXAMPLES), 16)
    assert bundle.info["usage_examples"] == len(EXAMPLES)
    # Quotes 3 and 4 have no examples: their vectors are the quote encoder's own.
    own = base.quote_encoder.encode_records(quotes)
    assert np.allclose(bundle.quote_vectors[3:], own[3:], atol=1e-6)
    ranked = bundle_ranker(bundle).score([Query("the cat sat", "")])
    assert ranked.shape == (1, len(quotes)) and np.isfinite(ranked).all()


def test_without_examples_the_default_is_zero_shot(base):
    bundle = learned_bundle(base, QUOTES[Language.EN], BankUsage([], [], []))
    assert bundle.fusion is None and not bundle.known_contexts


def test_what_was_learned_is_read_back_from_the_cache(base, monkeypatch):
    quotes, usage = QUOTES[Language.EN], BankUsage(EXAMPLES, REAL, [])
    first = learned_bundle(base, quotes, usage)
    assert cache_path(base, quotes, EXAMPLES, REAL, recipe()).is_file()

    def not_again(*args, **kwargs):
        raise AssertionError("learned again although cached")

    monkeypatch.setattr(default_bundles, "learn_usage", not_again)
    second = learned_bundle(base, quotes, usage)
    assert second.fusion == first.fusion
    assert np.array_equal(second.quote_vectors, first.quote_vectors)
    assert np.array_equal(second.known_vectors, first.known_vectors)


def test_other_examples_or_quotes_are_another_cache_entry_and_a_damaged_one_is_learned_again(base, monkeypatch):
    quotes = QUOTES[Language.EN]
    path = cache_path(base, quotes, EXAMPLES, REAL, recipe())
    assert cache_path(base, quotes, EXAMPLES[:-1], REAL[:-1], recipe()) != path
    assert cache_path(base, quotes, EXAMPLES, [not real for real in REAL], recipe()) != path
    changed = [*quotes[:-1], QuoteRecord(quotes[-1].text, quotes[-1].source, "a new gloss")]
    assert cache_path(base, changed, EXAMPLES, REAL, recipe()) != path
    assert cache_path(base, quotes, EXAMPLES, REAL, recipe(FusionRule.RRF)) != path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not an npz file")
    calls = []
    learn = default_bundles.learn_usage
    monkeypatch.setattr(
        default_bundles, "learn_usage", lambda *args, **kwargs: calls.append(1) or learn(*args, **kwargs)
    )
    assert learned_bundle(base, quotes, BankUsage(EXAMPLES, REAL, [])).fusion is not None
    assert calls == [1]


def test_a_new_entry_replaces_the_languages_older_one_only(base, tmp_path, monkeypatch):
    monkeypatch.setenv("QUOTER_CACHE", str(tmp_path / "cache"))
    folder = cache_path(base, [], [], [], recipe()).parent
    folder.mkdir(parents=True, exist_ok=True)
    older, other = folder / "en-0123.npz", folder / "zh-classical-0123.npz"
    older.write_bytes(b"old")
    other.write_bytes(b"other language")
    learned_bundle(base, QUOTES[Language.EN], BankUsage(EXAMPLES, REAL, []))
    assert not older.exists() and other.exists()
    assert [path.name.startswith("en-") for path in folder.glob("*.npz")].count(True) == 1


def test_a_cache_that_cannot_be_written_is_a_warning(base, monkeypatch, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be", encoding="utf-8")
    monkeypatch.setenv("QUOTER_CACHE", str(blocked))
    warnings: list[str] = []
    bundle = learned_bundle(base, QUOTES[Language.EN], BankUsage(EXAMPLES, REAL, []), warn=warnings.append)
    assert bundle.fusion is not None
    assert len(warnings) == 1 and "cannot cache what the en default learned" in warnings[0]


def test_usage_vectors_move_only_quotes_with_examples_and_keep_their_length():
    quotes = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    examples = [Sample("", 0, "", 1), Sample("", 0, "", 2)]
    vectors = np.array([[0.0, 3.0], [0.0, 1.0]], dtype=np.float32)
    moved = usage_vectors(quotes, examples, vectors, pull=1.0)
    assert np.allclose(moved[1:], quotes[1:])
    assert np.isclose(np.linalg.norm(moved[0]), 2.0)
    assert np.allclose(moved[0] / 2.0, np.array([1.0, 1.0]) / np.sqrt(2.0))
    assert np.allclose(usage_vectors(quotes, examples, vectors, pull=0.0), quotes)


def test_folds_take_each_quotes_examples_in_turn():
    assert folds_of(EXAMPLES).tolist() == [0, 0, 1, 0, 1, 1]


def test_real_and_written_examples_weigh_half_each():
    weights = balanced_weights([False, False, False, True])
    assert np.allclose(weights, [1 / 6, 1 / 6, 1 / 6, 1 / 2])
    assert np.allclose(balanced_weights([False, False]), [1.0, 1.0])


def test_the_banks_usage_examples_are_split_into_fit_and_held_back():
    for language in Language:
        quotes = load_quote_bank(language)
        usage = bank_usage(language, quotes)
        assert len(usage.fit) == len(usage.fit_real)
        # Every bank quote has its three written examples; real ones are held back now and then.
        written = [sample for sample, real in zip(usage.fit, usage.fit_real) if not real]
        assert len(written) == 3 * len(quotes)
        assert usage.held_back and all(0 <= sample.quote_id < len(quotes) for sample in usage.held_back)


def test_a_bad_usage_line_names_file_line_and_field(tmp_path):
    path = tmp_path / "en.real.tsv"
    header = "left\tquote\tright\tfile\tline\trule\tpart\n"
    path.write_text(header + "l\tq\tr\tbook.txt\t3\tverbatim\tsometimes\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"en.real.tsv:2 \(field 'part'\): part must be fit or held-back"):
        read_usage_file(path)
    path.write_text("l\tq\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"en.real.tsv:1: expected 3 or 7 tab-separated fields, found 2"):
        read_usage_file(path)
