"""A bundle saves and loads both encoders, the quotes and their vectors, and ranks the same afterwards."""

import json

import numpy as np
import pytest
import torch
from transformers import BertModel, BertTokenizerFast

from quoter.bundle import Bundle, QuoteRecord
from quoter.bundle_upgrade import upgrade_bundle
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder
from quoter.encoders.pooling import GapMarker, Pooling, PoolingMode
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.errors import InputError
from quoter.hybrid_bundle import bundle_ranker
from quoter.languages import Language
from quoter.ranking import Query
from quoter.sememes.alignment import SememeAnnotator
from quoter.sememes.sources import LexiconConfig, load_lexicon
from quoter.zero_shot_bundle import zero_shot_bundle
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.training_fixtures import write_model

QUOTES = [
    QuoteRecord("学而时习之，不亦说乎", "《论语·学而》"),
    QuoteRecord("我们喜欢学习"),
    QuoteRecord("不亦乐乎", ""),
]
QUERIES = [Query("我们", "喜欢"), Query("学而", "")]


@pytest.fixture
def chinese_bundle(tmp_path):
    lexicon_file = tmp_path / "sememes.txt"
    lexicon_file.write_text("学习\nstudy|学习 \n喜欢\nlove|爱 \n说\nspeak|说 \n", encoding="utf-8")
    lexicon = LexiconConfig(source=str(lexicon_file))
    annotator = SememeAnnotator(load_lexicon(lexicon, Language.ZH), Language.ZH)
    tokenizer = tiny_tokenizer(tmp_path / "tokenizer")
    context = ContextEncoder(tiny_model(tokenizer, seed=1), tokenizer, ContextEncoderConfig(max_length=32))
    quote = QuoteEncoder(tiny_model(tokenizer, seed=2), tokenizer, QuoteEncoderConfig(alpha=1.0), annotator)
    vectors = quote.encode([q.text for q in QUOTES])
    return Bundle(Language.ZH, context, quote, QUOTES, vectors, info={"note": "test"})


def test_save_then_load_ranks_identically(chinese_bundle, tmp_path):
    chinese_bundle.save(tmp_path / "bundle")
    chinese_bundle.save(tmp_path / "bundle")  # saving over a bundle replaces it whole
    loaded = Bundle.load(tmp_path / "bundle")
    assert loaded.language is Language.ZH and loaded.quotes == QUOTES and loaded.info == {"note": "test"}
    np.testing.assert_array_equal(loaded.quote_vectors, chinese_bundle.quote_vectors)
    np.testing.assert_array_equal(bundle_ranker(loaded).score(QUERIES), bundle_ranker(chinese_bundle).score(QUERIES))
    # The loaded quote encoder still adds sememes, so a new quote is encoded as before.
    new_quote = ["我们学习"]
    np.testing.assert_array_equal(
        loaded.quote_encoder.encode(new_quote), chinese_bundle.quote_encoder.encode(new_quote)
    )
    assert not list((tmp_path / "bundle").rglob("*.bin")) and not list((tmp_path / "bundle").rglob("*.pkl"))


def test_context_settings_survive(chinese_bundle, tmp_path):
    config = ContextEncoderConfig(20, Pooling(PoolingMode.MEAN, "q: ", normalize=True, scale=5.0), GapMarker.TEXT)
    chinese_bundle.context_encoder.config = config
    chinese_bundle.save(tmp_path / "b")
    assert Bundle.load(tmp_path / "b").context_encoder.config == config


def test_a_bundle_reads_nothing_outside_its_folder(chinese_bundle, tmp_path, monkeypatch):
    chinese_bundle.save(tmp_path / "b")
    (tmp_path / "sememes.txt").unlink()  # the lexicon it was trained with: a copy of it is inside the bundle
    monkeypatch.chdir(tmp_path / "b" / "quote_encoder")
    loaded = Bundle.load(tmp_path / "b")
    lexicon = loaded.quote_encoder.annotator.lexicon
    assert lexicon.description.startswith("word-sememe file") and "sememes.txt" in lexicon.description
    new_quote = ["我们学习"]
    np.testing.assert_array_equal(
        loaded.quote_encoder.encode(new_quote), chinese_bundle.quote_encoder.encode(new_quote)
    )


def _as_version_one(folder, lexicon_source):
    """Rewrite a saved bundle in the layout of version 1: the context encoder a bare transformers folder with
    its settings in bundle.json, the lexicon named by path, and the quote encoder without it."""
    settings = json.loads((folder / "bundle.json").read_text(encoding="utf-8"))
    context = json.loads((folder / "context_encoder" / "context_encoder.json").read_text(encoding="utf-8"))
    settings.update(version=1, context_encoder={"max_length": context["max_length"], "pooling": "mask"})
    settings["lexicon"] = {"source": lexicon_source, "cedict": None, "lemmas": None}
    (folder / "bundle.json").write_text(json.dumps(settings), encoding="utf-8")
    (folder / "context_encoder" / "context_encoder.json").unlink()
    for part in (folder / "context_encoder" / "model").iterdir():
        part.rename(folder / "context_encoder" / part.name)
    quote_settings = json.loads((folder / "quote_encoder" / "quote_encoder.json").read_text(encoding="utf-8"))
    for key in ("pooling", "gloss", "language", "identity"):
        del quote_settings[key]
    quote_settings["version"] = 1
    (folder / "quote_encoder" / "quote_encoder.json").write_text(json.dumps(quote_settings), encoding="utf-8")
    (folder / "quote_encoder" / "sememe_lexicon.json").unlink()


def test_a_version_one_bundle_is_refused_with_how_to_upgrade_it_and_upgrades(chinese_bundle, tmp_path, monkeypatch):
    chinese_bundle.save(tmp_path / "old")
    _as_version_one(tmp_path / "old", "sememes.txt")  # relative to the folder training ran in
    with pytest.raises(InputError, match="version 1 bundle.*quoter bundle upgrade"):
        Bundle.load(tmp_path / "old")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(InputError, match="holds other files than an earlier bundle .precious.txt."):
        upgrade_bundle(tmp_path / "old", tmp_path / "mine")
    assert [path.name for path in (tmp_path / "mine").iterdir()] == ["precious.txt"]
    upgrade_bundle(tmp_path / "old", tmp_path / "new")
    (tmp_path / "sememes.txt").unlink()
    loaded = Bundle.load(tmp_path / "new")
    assert loaded.context_encoder.config == ContextEncoderConfig(32, Pooling(PoolingMode.MASK), GapMarker.MASK)
    np.testing.assert_array_equal(bundle_ranker(loaded).score(QUERIES), bundle_ranker(chinese_bundle).score(QUERIES))
    new_quote = ["我们学习"]
    np.testing.assert_array_equal(
        loaded.quote_encoder.encode(new_quote), chinese_bundle.quote_encoder.encode(new_quote)
    )


def test_glosses_are_saved_with_the_quotes(chinese_bundle, tmp_path):
    glossed = [QuoteRecord(q.text, q.source, f"释义{i}") for i, q in enumerate(QUOTES)]
    chinese_bundle.quotes = glossed
    chinese_bundle.save(tmp_path / "b")
    assert Bundle.load(tmp_path / "b").quotes == glossed


def test_a_zero_shot_bundle_from_a_local_model(tmp_path):
    # Weights drawn wide, as for training's tests: with the tiny model's own, all vectors are nearly alike.
    folder = write_model(tmp_path / "model")
    bundle = zero_shot_bundle(Language.ZH, QUOTES, model=str(folder))
    assert bundle.quote_encoder.annotator is None and bundle.info["trained"] is False
    # A plain BERT is read as the paper reads it: a quote at [CLS], a context at the [MASK] standing in its gap.
    model, tokenizer = BertModel.from_pretrained(folder), BertTokenizerFast.from_pretrained(folder)

    def state(ids: list[int], position: int) -> np.ndarray:
        with torch.no_grad():
            return model(torch.tensor([ids])).last_hidden_state[0, position].numpy()

    quotes = np.stack([state(tokenizer(quote.text)["input_ids"], 0) for quote in QUOTES])
    np.testing.assert_allclose(bundle.quote_vectors, quotes, rtol=1e-5, atol=1e-5)
    contexts = []
    for query in QUERIES:
        left, right = (tokenizer(side, add_special_tokens=False)["input_ids"] for side in (query.left, query.right))
        ids = [tokenizer.cls_token_id, *left, tokenizer.mask_token_id, *right, tokenizer.sep_token_id]
        contexts.append(state(ids, len(left) + 1))
    np.testing.assert_allclose(
        bundle_ranker(bundle).score(QUERIES), np.stack(contexts) @ quotes.T, rtol=1e-5, atol=1e-4
    )


def test_vectors_must_match_the_quotes(chinese_bundle):
    with pytest.raises(ValueError, match="3 quotes but 2 quote vectors"):
        Bundle(
            Language.ZH,
            chinese_bundle.context_encoder,
            chinese_bundle.quote_encoder,
            QUOTES,
            chinese_bundle.quote_vectors[:2],
        )


def test_a_folder_that_is_not_a_bundle_is_a_clear_error(chinese_bundle, tmp_path):
    with pytest.raises(InputError, match="not a Quoter bundle"):
        Bundle.load(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="file: not a Quoter bundle: a file there, not a folder"):
        Bundle.load(tmp_path / "file")
    chinese_bundle.save(tmp_path / "b")
    (tmp_path / "b" / "quotes.jsonl").write_text('{"quote": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match="quotes.jsonl:2"):
        Bundle.load(tmp_path / "b")


def test_a_bundle_with_a_pickled_file_is_refused_before_anything_is_loaded(chinese_bundle, tmp_path):
    chinese_bundle.save(tmp_path / "b")
    (tmp_path / "b" / "context_encoder" / "model" / "model.safetensors").unlink()
    # transformers would load this in place of the missing safetensors file.
    torch.save({"weights": torch.zeros(1)}, tmp_path / "b" / "context_encoder" / "model" / "pytorch_model.bin")
    with pytest.raises(InputError, match="pytorch_model.bin: a bundle holds no pickled files"):
        Bundle.load(tmp_path / "b")
