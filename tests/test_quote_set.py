"""Quote sets: `quoter encode` turns a quote list into a quote set with a bundle's quote encoder, and serve, batch
and evaluate rank it with that bundle."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from quoter.bundle import Bundle
from quoter.cli import app
from quoter.datasets import QuoteDataset
from quoter.errors import InputError
from quoter.languages import Language
from quoter.methods import MethodOptions, build_ranker
from quoter.quote_bank import bank_path, load_quote_bank
from quoter.quote_list import read_quote_list
from quoter.quote_record import QuoteRecord
from quoter.quote_set import encode_quote_set, read_quote_set, write_quote_set
from quoter.ranking import Query
from tests.serving_fixtures import LOOPBACK_URL, tiny_bundle


@pytest.fixture
def bundle_folder(tmp_path):
    tiny_bundle(tmp_path / "en", Language.EN).save(tmp_path / "bundle")
    return tmp_path / "bundle"


def _quoter(*args):
    result = CliRunner().invoke(app, [*map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def test_the_built_in_bank_encoded_with_a_trained_bundle_is_served_with_its_sources(bundle_folder, tmp_path, served):
    bank = load_quote_bank(Language.EN)
    sources = {record.text: record.source for record in bank}
    quote_set = tmp_path / "bank.quotes.jsonl"
    _quoter("encode", "--bundle", bundle_folder, "--quotes", bank_path(Language.EN), "--out", quote_set)
    encoded = read_quote_set(quote_set)
    assert encoded.records == bank and encoded.ids == list(range(len(bank)))
    assert encoded.encoder == Bundle.load(bundle_folder).quote_encoder.identity

    result, calls = served("--bundle", f"en={bundle_folder}", "--quotes", f"en={quote_set}")
    assert result.exit_code == 0, result.output
    with TestClient(calls["app"], base_url=LOOPBACK_URL) as client:
        assert client.get("/health").json()["bundles"][0]["quotes"] == len(bank)
        results = client.post("/recommend", json={"left": "the cat", "right": "home", "k": 5}).json()["results"]
        assert len(results) == 5 and all(r["source"] == sources[r["quote"]] and r["source"] for r in results)
        added = client.post("/quotes", json={"quote": "the cat ran home", "source": "Farm", "lang": "en"})
        assert added.status_code == 201 and added.json()["id"] == len(bank)
    # The live change went beside the quote set, which itself is left as written.
    assert (tmp_path / "bank.quotes.jsonl.live" / "quote_index").is_dir()
    assert read_quote_set(quote_set).records == bank

    contexts = tmp_path / "contexts.jsonl"
    contexts.write_text(json.dumps({"left": "the cat", "right": "home"}) + "\n", encoding="utf-8")
    output = tmp_path / "top.jsonl"
    _quoter(
        "batch", "--bundle", bundle_folder, "--quotes", quote_set, "--input", contexts, "--output", output, "--k", 3
    )
    ranked = json.loads(output.read_text(encoding="utf-8"))["results"]
    assert all(r["source"] == sources.get(r["quote"], "Farm") for r in ranked)


def test_a_quote_set_of_another_encoder_is_refused(bundle_folder, tmp_path, served):
    tiny_bundle(tmp_path / "other", Language.EN, seed=5).save(tmp_path / "other-bundle")
    quote_set = tmp_path / "other.quotes.jsonl"
    _quoter("encode", "--bundle", tmp_path / "other-bundle", "--quotes", bank_path(Language.EN), "--out", quote_set)
    result, _ = served("--bundle", f"en={bundle_folder}", "--quotes", f"en={quote_set}")
    assert "encoded by another quote encoder" in str(result.exception)
    result, _ = served("--quotes", f"en={quote_set}")
    assert "--quotes needs the --bundle" in str(result.exception)
    with pytest.raises(InputError, match="encoded by another quote encoder"):
        dataset = QuoteDataset(path=tmp_path / "data.tsv", quotes=["the cat sat on the mat"], samples=[])
        build_ranker("bundle", dataset, MethodOptions(bundle=str(bundle_folder), quotes=str(quote_set)))


def test_encoding_reuses_the_vectors_of_the_quotes_a_set_already_holds(bundle_folder):
    bundle = Bundle.load(bundle_folder)
    records = [QuoteRecord("a new quote"), bundle.quotes[1]]
    encoded = encode_quote_set(bundle.quote_encoder, records, bundle.quote_set())
    np.testing.assert_array_equal(encoded.vectors[1], bundle.quote_vectors[1])
    np.testing.assert_allclose(encoded.vectors[0], bundle.quote_encoder.encode(["a new quote"])[0], rtol=1e-5)
    # Evaluating with a quote set ranks with its vectors.
    dataset = QuoteDataset(path=bundle_folder / "data.tsv", quotes=[r.text for r in records], samples=[])
    queries = [Query("the cat", "home")]
    own = build_ranker("bundle", dataset, MethodOptions(bundle=str(bundle_folder))).score(queries)
    write_quote_set(bundle_folder.parent / "set.jsonl", encoded)
    options = MethodOptions(bundle=str(bundle_folder), quotes=str(bundle_folder.parent / "set.jsonl"))
    np.testing.assert_allclose(build_ranker("bundle", dataset, options).score(queries), own, rtol=1e-5)


def test_quote_lists_come_as_tsv_with_or_without_header_as_json_lines_or_as_a_data_file(bundle_folder, tmp_path):
    expected = [QuoteRecord("the cat", "Nursery", "a pet"), QuoteRecord("the dog", "")]
    (tmp_path / "with.tsv").write_text("quote\tsource\tgloss\nthe cat\tNursery\ta pet\nthe dog\t\n", encoding="utf-8")
    (tmp_path / "without.tsv").write_text("the cat\tNursery\ta pet\nthe dog\t\n", encoding="utf-8")
    lines = [{"quote": "the cat", "source": "Nursery", "gloss": "a pet"}, {"quote": "the dog"}]
    (tmp_path / "list.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    for name in ("with.tsv", "without.tsv", "list.jsonl"):
        assert read_quote_list(tmp_path / name) == expected
    (tmp_path / "bad.jsonl").write_text('{"quote": "a"}\n{"quote": 3}\n', encoding="utf-8")
    with pytest.raises(InputError, match="bad.jsonl:2"):
        read_quote_list(tmp_path / "bad.jsonl")

    (tmp_path / "data.txt").write_text("a\tthe dog\tb\nc\tthe cat\td\ne\tthe dog\tf\n", encoding="utf-8")
    out = tmp_path / "data.quotes.jsonl"
    _quoter("encode", "--bundle", bundle_folder, "--data", tmp_path / "data.txt", "--glosses", tmp_path / "with.tsv",
            "--out", out)  # fmt: skip
    assert read_quote_set(out).records == expected[::-1]
    result = CliRunner().invoke(app, ["encode", "--bundle", str(bundle_folder), "--out", str(out)])
    assert "--quotes LIST or --data FILE" in str(result.exception)
    out.write_text('{"format": "something else"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="not a quote set"):
        read_quote_set(out)
