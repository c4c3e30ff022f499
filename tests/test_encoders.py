"""The context and quote encoders on tiny models: truncation, pooling, Eq. 6 sememes, save/load, ranking."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import BertModel, BertTokenizerFast
from typer.testing import CliRunner

from quoter.cli import app
from quoter.encoders.configs import ContextEncoderConfig, QuoteEncoderConfig
from quoter.encoders.context_encoder import ContextEncoder, fit_context
from quoter.encoders.frozen_layers import set_dropout
from quoter.encoders.pooling import GAP_TEXT, GapMarker, Pooling, PoolingMode
from quoter.encoders.quote_encoder import QuoteEncoder
from quoter.encoders.ranker import EncoderRanker
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.metrics import ranks_from_scores
from quoter.quote_record import QuoteRecord
from quoter.ranking import Query
from quoter.sememes.alignment import SememeAnnotator
from quoter.sememes.english import EnglishLexicon, LemmaTableLemmatizer
from quoter.sememes.lexicon import TableLexicon
from tests.encoder_fixtures import tiny_model, tiny_tokenizer
from tests.training_fixtures import write_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("tiny"))
    return tiny_model(tokenizer), tokenizer


def english_annotator(table):
    lexicon = EnglishLexicon(TableLexicon(("s0", "s1", "s2"), table, "test"), LemmaTableLemmatizer({}))
    return SememeAnnotator(lexicon, Language.EN)


def plain_cls(model, tokenizer, quotes):
    encoded = tokenizer(quotes, padding=True, return_tensors="pt")
    with torch.no_grad():
        return model(**encoded).last_hidden_state[:, 0].numpy()


# --- context truncation -------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, 1, 2, 5, 8, 13])
def test_fit_context_keeps_the_tokens_next_to_the_gap_and_shares_the_budget(budget):
    for n_left in range(0, 16):
        for n_right in range(0, 16):
            left, right = list(range(n_left)), list(range(100, 100 + n_right))
            kept_left, kept_right = fit_context(left, right, budget)
            assert kept_left == left[len(left) - len(kept_left) :]  # a suffix: the far (start) end was cut
            assert kept_right == right[: len(kept_right)]  # a prefix: the far (end) end was cut
            assert len(kept_left) + len(kept_right) == min(budget, n_left + n_right)
            assert len(kept_left) >= min(n_left, budget // 2)
            assert len(kept_right) >= min(n_right, budget - budget // 2)


@pytest.mark.parametrize("pooling", list(PoolingMode))
@pytest.mark.parametrize(
    "left,right",
    [
        ("the cat sat on the mat " * 20, "the dog ran home " * 20),
        ("the cat sat on the mat " * 20, ""),
        ("", "the dog ran home " * 20),
        ("", ""),
        ("cat", "dog " * 50),
    ],
)
def test_the_gap_marker_survives_any_truncation(tiny, pooling, left, right):
    model, tokenizer = tiny
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(max_length=9, pooling=Pooling(pooling)))
    (row,) = encoder.rows([Query(left, right)])
    assert len(row.input_ids) <= 9
    assert row.input_ids[0] == tokenizer.cls_token_id and row.input_ids[-1] == tokenizer.sep_token_id
    if pooling is not PoolingMode.CLS:
        assert row.input_ids.count(tokenizer.mask_token_id) == 1
        assert row.input_ids[row.position] == tokenizer.mask_token_id
    else:
        assert row.position == 0 and row.input_ids.count(tokenizer.sep_token_id) == 2
    assert len(encoder.encode([Query(left, right)])) == 1


def test_the_kept_context_is_the_text_next_to_the_gap(tiny):
    model, tokenizer = tiny
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(max_length=7))
    (row,) = encoder.rows([Query("cat sat on the mat", "dog ran home")])
    tokens = tokenizer.convert_ids_to_tokens(row.input_ids)
    assert tokens == ["[CLS]", "the", "mat", "[MASK]", "dog", "ran", "[SEP]"]


def test_a_context_vector_is_the_hidden_state_at_the_mask(tiny):
    model, tokenizer = tiny
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig())
    queries = [Query("the cat sat on the", "."), Query("a dog", ""), Query("", "sat on the mat")]
    vectors = encoder.encode(queries, batch_size=2)
    for query, vector in zip(queries, vectors):
        text = f"{query.left} {tokenizer.mask_token} {query.right}"
        encoded = tokenizer(text, return_tensors="pt")
        position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        with torch.no_grad():
            expected = model(**encoded).last_hidden_state[0, position].numpy()
        np.testing.assert_allclose(vector, expected, atol=1e-5)


@pytest.mark.parametrize("mode", [PoolingMode.MASK, PoolingMode.MEAN])
def test_a_training_batch_runs_in_calls_of_similar_length_with_the_whole_batchs_vectors_and_gradients(tiny, mode):
    tokenizer = tiny[1]
    model = tiny_model(tokenizer, seed=1)
    set_dropout(model, 0.0)
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(max_length=128, pooling=Pooling(mode)))
    # Contexts of 4 to about 100 tokens, mixed as a random training batch mixes them.
    story = "the cat sat on the mat and then the dog ran home happy " * 8
    queries = [Query(story[:n], story[n : n + n // 3]) for n in (300, 5, 280, 12, 200, 1, 40, 320)]
    batch = encoder.prepare(queries)
    weights = torch.randn(len(queries), model.config.hidden_size)

    def vectors_and_gradients(training: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        encoder.train(training)
        encoder.zero_grad(set_to_none=True)
        vectors = encoder(batch)
        (vectors * weights).sum().backward()
        parameters = encoder.named_parameters()
        return vectors.detach(), {name: p.grad.clone() for name, p in parameters if p.grad is not None}

    whole, whole_gradients = vectors_and_gradients(training=False)
    calls = []
    padded_forward = encoder._padded_forward
    encoder._padded_forward = lambda part: calls.append(part.attention_mask) or padded_forward(part)
    in_calls, call_gradients = vectors_and_gradients(training=True)
    assert len(calls) > 1 and sum(len(mask) for mask in calls) == len(queries)
    assert all(mask[:, -1].any() for mask in calls), "a call padded past its longest context"
    torch.testing.assert_close(in_calls, whole, rtol=0, atol=1e-5)
    assert call_gradients.keys() == whole_gradients.keys() and whole_gradients
    for name, expected in whole_gradients.items():
        torch.testing.assert_close(call_gradients[name], expected, rtol=1e-5, atol=1e-5)


def test_cls_pooling_is_bert_sim_with_the_right_context_as_second_segment(tiny):
    model, tokenizer = tiny
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(pooling=Pooling(PoolingMode.CLS)))
    vector = encoder.encode([Query("the cat sat", "on the mat")])[0]
    encoded = tokenizer("the cat sat", "on the mat", return_tensors="pt")
    with torch.no_grad():
        expected = model(**encoded).last_hidden_state[0, 0].numpy()
    np.testing.assert_allclose(vector, expected, atol=1e-5)


def mean_state(model, tokenizer, text: str) -> np.ndarray:
    """The plain mean of the model's final states over a text's tokens, [CLS] and [SEP] included."""
    encoded = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return model(**encoded).last_hidden_state[0].mean(0).numpy()


@pytest.mark.parametrize("gap", list(GapMarker))
def test_mean_pooling_averages_every_token_with_the_chosen_gap_marker_and_prompt(tiny, gap):
    model, tokenizer = tiny
    pooling = Pooling(PoolingMode.MEAN, prompt="the ")
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(pooling=pooling, gap=gap))
    vector = encoder.encode([Query("cat sat", "on the mat")])[0]
    middle = {GapMarker.MASK: f" {tokenizer.mask_token} ", GapMarker.TEXT: f" {GAP_TEXT} ", GapMarker.NONE: " "}[gap]
    np.testing.assert_allclose(vector, mean_state(model, tokenizer, f"the cat sat{middle}on the mat"), atol=1e-5)


def test_normalised_pooling_gives_vectors_of_the_scale_length(tiny):
    model, tokenizer = tiny
    pooling = Pooling(PoolingMode.MEAN, normalize=True, scale=20.0)
    encoder = ContextEncoder(model, tokenizer, ContextEncoderConfig(pooling=pooling, gap=GapMarker.NONE))
    vectors = encoder.encode([Query("cat sat", "on the mat"), Query("a dog", "")])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 20.0, rtol=1e-5)
    with pytest.raises(QuoterError, match="scale"):
        Pooling(scale=0)


def test_a_prompt_longer_than_the_length_allows_is_a_clear_error(tiny):
    model, tokenizer = tiny
    with pytest.raises(QuoterError, match="no room"):
        ContextEncoder(model, tokenizer, ContextEncoderConfig(max_length=6, pooling=Pooling(prompt="the cat sat on")))


def test_a_tokenizer_without_a_mask_token_or_too_short_a_length_is_a_clear_error(tiny):
    model, _ = tiny
    no_mask = SimpleNamespace(cls_token_id=2, sep_token_id=3, pad_token_id=0, mask_token_id=None)
    with pytest.raises(QuoterError, match="no mask token"):
        ContextEncoder(model, no_mask, ContextEncoderConfig())
    ContextEncoder(
        model, no_mask, ContextEncoderConfig(pooling=Pooling(PoolingMode.CLS))
    )  # [CLS] pooling needs no mask
    mean = Pooling(PoolingMode.MEAN)
    with pytest.raises(QuoterError, match="no mask token"):
        ContextEncoder(model, no_mask, ContextEncoderConfig(pooling=mean, gap=GapMarker.MASK))
    with pytest.raises(QuoterError, match="max_length"):
        ContextEncoderConfig(max_length=3)


# --- quote encoder and Eq. 6 ----------------------------------------------------------------------------------


def test_quote_vectors_are_cls_states_with_padding_masked_out(tiny):
    model, tokenizer = tiny
    encoder = QuoteEncoder(model, tokenizer, QuoteEncoderConfig())
    quotes = ["a cat", "the happy dog sat on the mat , the cat ran home ."]
    together = encoder.encode(quotes, batch_size=2)
    for quote, vector in zip(quotes, together):
        np.testing.assert_allclose(vector, plain_cls(model, tokenizer, [quote])[0], atol=1e-5)


def test_sememes_reach_exactly_the_wordpieces_of_their_english_word(tiny):
    model, tokenizer = tiny
    annotator = english_annotator({"unhappiness": frozenset({0, 1}), "cat": frozenset({2})})
    encoder = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(alpha=2.0), annotator)
    quote = "the unhappiness of a cat"
    batch = encoder.prepare([quote])
    tokens = tokenizer.convert_ids_to_tokens(batch.input_ids[0].tolist())
    assert tokens == ["[CLS]", "the", "un", "##happi", "##ness", "[UNK]", "a", "cat", "[SEP]"]
    with torch.no_grad():
        added = encoder.input_embeddings(batch)[0] - model.get_input_embeddings()(batch.input_ids)[0]
        sememes = encoder.sememe_embeddings.weight
    expected = {
        2: 2.0 * (sememes[0] + sememes[1]) / 2,
        3: 2.0 * (sememes[0] + sememes[1]) / 2,
        4: 2.0 * (sememes[0] + sememes[1]) / 2,
        7: 2.0 * sememes[2],
    }
    for position in range(len(tokens)):
        if position in expected:
            torch.testing.assert_close(added[position], expected[position])
        else:
            assert torch.count_nonzero(added[position]) == 0, tokens[position]


def test_sememes_reach_the_tokens_of_jieba_words_with_the_character_fallback(tiny):
    model, tokenizer = tiny
    table = {"学习": frozenset({0, 1}), "喜": frozenset({2})}
    annotator = SememeAnnotator(TableLexicon(("s0", "s1", "s2"), table, "test"), Language.ZH)
    quote = "我们喜欢学习"
    words = annotator.annotate(quote)
    assert [word.word.word for word in words] == ["我们", "喜欢", "学习"]  # jieba's segmentation
    assert [(word.by_characters, [(s.start, s.end) for s in word.spans]) for word in words] == [
        (True, []),
        (True, [(2, 3)]),
        (False, [(4, 6)]),
    ]
    encoder = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(alpha=1.0), annotator)
    batch = encoder.prepare([quote])
    assert tokenizer.convert_ids_to_tokens(batch.input_ids[0].tolist()) == ["[CLS]", *quote, "[SEP]"]
    with torch.no_grad():
        added = encoder.input_embeddings(batch)[0] - model.get_input_embeddings()(batch.input_ids)[0]
        sememes = encoder.sememe_embeddings.weight
    # [CLS] 我 们 喜 欢 学 习 [SEP]: 喜 by the fallback, 学 and 习 by their word 学习.
    expected = {3: sememes[2], 5: (sememes[0] + sememes[1]) / 2, 6: (sememes[0] + sememes[1]) / 2}
    for position in range(batch.input_ids.shape[1]):
        if position in expected:
            torch.testing.assert_close(added[position], expected[position])
        else:
            assert torch.count_nonzero(added[position]) == 0


def test_alpha_zero_or_no_sememes_equals_the_plain_model(tiny):
    model, tokenizer = tiny
    annotator = english_annotator({"cat": frozenset({0}), "dog": frozenset({1, 2})})
    quotes = ["the cat sat on the mat", "a dog ran home", "the happy cat"]
    plain = plain_cls(model, tokenizer, quotes)
    for encoder in (
        QuoteEncoder(model, tokenizer, QuoteEncoderConfig(alpha=0.0), annotator),
        QuoteEncoder(model, tokenizer, QuoteEncoderConfig()),
    ):
        np.testing.assert_allclose(encoder.encode(quotes, batch_size=3), plain, rtol=0, atol=1e-6)
    with_sememes = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(alpha=1.0), annotator).encode(quotes)
    assert not np.allclose(with_sememes[:2], plain[:2], atol=1e-4)


def test_encoding_leaves_every_module_in_the_mode_it_was_in(tiny):
    model, tokenizer = tiny
    encoder = QuoteEncoder(model, tokenizer, QuoteEncoderConfig())
    model.train()
    try:
        first = encoder.encode(["the cat sat"])
        assert model.training  # restored, and dropout did not touch the vectors
        np.testing.assert_allclose(first, encoder.encode(["the cat sat"]), atol=0)
    finally:
        model.eval()
    encoder.encode(["the cat sat"])
    assert not model.training


def test_save_then_load_returns_identical_vectors(tiny, tmp_path):
    model, tokenizer = tiny
    annotator = english_annotator({"cat": frozenset({0, 1}), "happy": frozenset({2})})
    encoder = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(max_length=12, alpha=0.2), annotator)
    quotes = ["the happy cat sat on the mat", "a dog ran home"]
    before = encoder.encode(quotes)
    encoder.save(tmp_path / "saved")
    encoder.save(tmp_path / "saved")  # saving over an existing folder replaces it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]  # no temporary folders left behind
    loaded = QuoteEncoder.load(tmp_path / "saved")
    assert loaded.config == encoder.config and loaded.sememe_names == encoder.sememe_names
    assert loaded.annotator.lexicon.sememes("cat") == annotator.lexicon.sememes("cat")
    assert loaded.identity == encoder.identity == encoder.weights_digest()
    np.testing.assert_array_equal(loaded.encode(quotes), before)
    assert not list((tmp_path / "saved").rglob("*.bin")) and not list((tmp_path / "saved").rglob("*.pt"))


def test_loading_a_wrong_folder_or_one_missing_weights_is_a_clear_error(tiny, tmp_path):
    model, tokenizer = tiny
    QuoteEncoder(model, tokenizer, QuoteEncoderConfig()).save(tmp_path / "quote")
    ContextEncoder(model, tokenizer, ContextEncoderConfig()).save(tmp_path / "context")
    with pytest.raises(QuoterError, match="not a saved quote encoder"):
        QuoteEncoder.load(tmp_path)
    with pytest.raises(QuoterError, match="not a saved context encoder"):
        ContextEncoder.load(tmp_path / "quote")
    # Both encoders load their model through the same checked path: a weight they need may not be missing.
    for name, encoder in (("quote", QuoteEncoder), ("context", ContextEncoder)):
        weights = tmp_path / name / "model" / "model.safetensors"
        tensors = load_file(str(weights))
        save_file({key: value for key, value in tensors.items() if "layer.0." not in key}, str(weights))
        with pytest.raises(QuoterError, match="lacks weights the encoder needs"):
            encoder.load(tmp_path / name)


def test_the_encoder_ranker_scores_by_inner_product(tiny):
    model, tokenizer = tiny
    contexts = ContextEncoder(model, tokenizer, ContextEncoderConfig())
    quotes = QuoteEncoder(model, tokenizer, QuoteEncoderConfig())
    quote_texts = ["the cat sat on the mat", "a dog ran home", "happy"]
    ranker = EncoderRanker(contexts, quotes.encode(quote_texts), batch_size=2)
    queries = [Query("the cat", "sat"), Query("", "home")]
    scores = ranker.score(queries)
    assert scores.shape == (2, 3)
    expected = contexts.encode(queries) @ quotes.encode(quote_texts).T
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    assert ranker.score([]).shape == (0, 3)


# Contexts and quotes in the tiny model's words (no [UNK], so no two quotes read alike): train, valid, test.
EVALUATED_ROWS = [
    ("the cat", "sat on the mat", "the cat sat on the mat"),
    ("a dog", ".", "a dog ran home"),
    ("the cat sat on", ", happy", "happy"),
    ("un", "happiness", "unhappiness"),
    ("the dog", "ran home", "a dog ran home"),
    ("a happy cat", "sat on the mat .", "the cat sat on the mat"),
    ("the mat ,", "the dog sat", "happy"),
    ("a cat ran", "un", "unhappiness"),
    ("happy dog", ", the cat", "the dog sat"),
    ("a", "home", "a cat ran home"),
]


@pytest.mark.parametrize(
    ("pooling", "context_mode", "quote_mode"),
    # Native: the tiny model is no sentence embedder, so it is read as the paper reads BERT.
    [("mask", "mask", "cls"), ("cls", "cls", "cls"), ("mean", "mean", "mean"), ("native", "mask", "cls")],
)
def test_quoter_evaluate_ranks_with_an_untrained_encoder(tmp_path, write_dataset, pooling, context_mode, quote_mode):
    # Weights drawn wide, as for training's tests: with the tiny model's own, all scores are nearly alike.
    folder = write_model(tmp_path / "model")
    model, tokenizer = BertModel.from_pretrained(folder), BertTokenizerFast.from_pretrained(folder)
    rows = [(left, quote, right) for left, right, quote in EVALUATED_ROWS]
    data = write_dataset(rows, {"train": [0, 2], "valid": [2, 4], "test": [4, 10]})
    out = tmp_path / "metrics.json"
    arguments = ["evaluate", "--method", "encoder", "--model", str(folder), "--context-pooling", pooling]
    arguments += ["--data", str(data), "--out", str(out)]
    if pooling == "mask":  # once as users start it, a process of its own
        finished = subprocess.run([sys.executable, "-m", "quoter", *arguments], capture_output=True, text=True)
        assert finished.returncode == 0, finished.stderr
        printed = finished.stdout
    else:
        result = CliRunner().invoke(app, arguments)
        assert result.exit_code == 0, result.output
        printed = result.output
    assert "encoder on test" in printed
    metrics = json.loads(out.read_text())
    # The test contexts ranked here by the same model read with the chosen pooling, over all quotes.
    quote_texts = list(dict.fromkeys(quote for _, _, quote in EVALUATED_ROWS))
    contexts = ContextEncoder(model, tokenizer, ContextEncoderConfig(pooling=Pooling(PoolingMode(context_mode))))
    quotes = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(pooling=Pooling(PoolingMode(quote_mode))))
    test = EVALUATED_ROWS[4:]
    scores = contexts.encode([Query(left, right) for left, right, _ in test]) @ quotes.encode(quote_texts).T
    gold = [quote_texts.index(quote) for _, _, quote in test]
    # No score comes near its gold quote's, so rounding cannot change a rank.
    gaps = np.abs(scores - scores[np.arange(len(gold)), gold][:, None])
    assert np.sort(gaps, axis=1)[:, 1].min() > 1e-4
    ranks = ranks_from_scores(scores, gold)
    assert (metrics["method"], metrics["n"], metrics["quotes"]) == ("encoder", 6, 6)
    assert metrics["mrr"] == pytest.approx(np.mean(1.0 / ranks)) and metrics["mean_rank"] == np.mean(ranks)
    if pooling != "mask":
        return  # an unloadable model is the same error with any pooling
    command = [sys.executable, "-m", "quoter", *arguments[:4], str(tmp_path / "missing")]
    missing = subprocess.run(command, capture_output=True, text=True)
    assert missing.returncode == 2 and "could not load" in missing.stderr and "Traceback" not in missing.stderr


def test_a_quote_is_read_after_its_prompt_and_before_its_gloss_when_glosses_are_on(tiny):
    model, tokenizer = tiny
    config = QuoteEncoderConfig(pooling=Pooling(PoolingMode.MEAN, prompt="the "), gloss=True)
    encoder = QuoteEncoder(model, tokenizer, config)
    (row,) = encoder.rows([QuoteRecord("cat sat", gloss="a dog")])
    tokens = tokenizer.convert_ids_to_tokens(row.input_ids)
    assert tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "a", "dog", "[SEP]"]
    vector = encoder.encode_records([QuoteRecord("cat sat", gloss="a dog")])[0]
    np.testing.assert_allclose(vector, mean_state(model, tokenizer, "the cat sat [SEP] a dog"), atol=1e-5)
    off = QuoteEncoder(model, tokenizer, QuoteEncoderConfig(pooling=Pooling(PoolingMode.MEAN, prompt="the ")))
    np.testing.assert_allclose(
        off.encode_records([QuoteRecord("cat sat", gloss="a dog")]), encoder.encode(["cat sat"]), atol=1e-6
    )


def test_sememes_stay_on_the_quote_words_behind_a_prompt_and_before_a_gloss(tiny):
    model, tokenizer = tiny
    config = QuoteEncoderConfig(alpha=1.0, pooling=Pooling(PoolingMode.MEAN, prompt="a "), gloss=True)
    encoder = QuoteEncoder(model, tokenizer, config, english_annotator({"cat": frozenset({0})}))
    (row,) = encoder.rows([QuoteRecord("the cat", gloss="cat")])
    tokens = tokenizer.convert_ids_to_tokens(row.input_ids)
    assert tokens == ["[CLS]", "a", "the", "cat", "[SEP]", "cat", "[SEP]"]
    assert [(term.token, term.sememe) for term in row.sememes] == [(3, 0)]


def test_a_saved_quote_encoder_keeps_its_pooling_and_gloss_setting(tiny, tmp_path):
    model, tokenizer = tiny
    config = QuoteEncoderConfig(pooling=Pooling(PoolingMode.MEAN, "the ", normalize=True, scale=2.0), gloss=True)
    QuoteEncoder(model, tokenizer, config).save(tmp_path / "saved")
    assert QuoteEncoder.load(tmp_path / "saved").config == config
