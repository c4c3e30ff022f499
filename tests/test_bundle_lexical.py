"""A hybrid bundle keeps its BM25 settings: saved with non-default ones, it ranks the same once loaded; a bundle
saved before they were kept loads with the defaults; bundle.json records the library versions that wrote it."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import metadata

import numpy as np
import pytest

from quoter.baselines.lexical_index import LexicalConfig
from quoter.bundle import Bundle
from quoter.datasets import Sample
from quoter.errors import InputError
from quoter.fusion import Fusion
from quoter.hybrid_bundle import bundle_ranker
from quoter.ranking import Query
from tests.serving_fixtures import tiny_bundle

# BM25 and CRM weigh most, so that their settings show in the fused scores.
FUSION = Fusion(weights={"dense": 1.0, "bm25": 3.0, "crm": 5.0, "knn": 1.0})
KNOWN = [Sample("a cat sat on my mat", 0, "and purred", 1), Sample("the dog ran and ran", 1, "home", 2)]
LEXICAL = LexicalConfig(k1=0.2, b=0.0)
QUERIES = [Query("the cat sat", "on the mat"), Query("a dog ran", "home"), Query("happy cat", "dog")]


@pytest.fixture
def hybrid(tmp_path) -> Bundle:
    """A tiny hybrid bundle with non-default BM25 settings."""
    bundle = tiny_bundle(tmp_path / "tok")
    bundle.fusion, bundle.known_contexts, bundle.lexical = FUSION, list(KNOWN), LEXICAL
    bundle.known_vectors = bundle.context_encoder.encode([Query(sample.left, sample.right) for sample in KNOWN])
    return bundle


def test_a_saved_hybrid_bundle_ranks_the_same_with_its_lexical_settings(hybrid, tmp_path):
    expected = bundle_ranker(hybrid).score(QUERIES)
    hybrid.save(tmp_path / "bundle")
    loaded = Bundle.load(tmp_path / "bundle")
    assert loaded.lexical == LEXICAL
    found = bundle_ranker(loaded).score(QUERIES)
    np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-6)
    assert (np.argsort(-found, axis=1, kind="stable") == np.argsort(-expected, axis=1, kind="stable")).all()
    # The settings count: with the defaults the same bundle ranks otherwise.
    defaults = bundle_ranker(replace(loaded, lexical=LexicalConfig())).score(QUERIES)
    assert not np.allclose(defaults, expected, atol=1e-3)


def test_a_bundle_saved_before_the_lexical_settings_were_kept_loads_with_the_defaults(hybrid, tmp_path):
    hybrid.save(tmp_path / "bundle")
    path = tmp_path / "bundle" / "bundle.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    assert settings["lexical"] == {"k1": LEXICAL.k1, "b": LEXICAL.b}
    del settings["lexical"], settings["written_with"]
    path.write_text(json.dumps(settings), encoding="utf-8")
    assert Bundle.load(tmp_path / "bundle").lexical == LexicalConfig()


def test_a_bad_lexical_setting_names_the_file_and_the_field(hybrid, tmp_path):
    hybrid.save(tmp_path / "bundle")
    path = tmp_path / "bundle" / "bundle.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["lexical"]["k1"] = "high"
    path.write_text(json.dumps(settings), encoding="utf-8")
    with pytest.raises(InputError, match=r"bundle\.json: lexical\.k1: expected a number, got 'high'"):
        Bundle.load(tmp_path / "bundle")


def test_bundle_json_records_the_library_versions_that_wrote_it(hybrid, tmp_path):
    hybrid.save(tmp_path / "bundle")
    settings = json.loads((tmp_path / "bundle" / "bundle.json").read_text(encoding="utf-8"))
    assert settings["written_with"]["torch"] == metadata.version("torch")
    assert set(settings["written_with"]) == {"quoter", "torch", "transformers", "safetensors", "numpy"}
