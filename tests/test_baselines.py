"""The lexical baselines find a planted obvious quote, and score exactly as bm25s does."""

import bm25s
import numpy as np
import pytest

from quoter.baselines import BM25Ranker, CRMRanker, LexicalIndex, lexical_tokens
from quoter.baselines.crm import Aggregate
from quoter.datasets import load_dataset
from quoter.errors import QuoterError
from quoter.evaluation import evaluate
from quoter.languages import Language
from quoter.ranking import Query

FILLER = ["the weather was mild", "we walked to the market", "nothing much happened", "they talked at length"]


def planted_rows():
    """Six quotes; each context mentions words that belong to its gold quote (and its other contexts)."""
    topics = {
        "a rolling stone gathers no moss": "stone moss rolling",
        "fortune favours the brave": "brave fortune soldiers",
        "time and tide wait for no man": "tide harbour sailors",
        "knowledge itself is power": "knowledge scholars library",
        "the early bird catches the worm": "worm dawn bird",
        "every cloud has a silver lining": "cloud silver storm",
    }
    rows = []
    for split_round in range(5):
        for i, (quote, words) in enumerate(topics.items()):
            filler = FILLER[(i + split_round) % len(FILLER)]
            rows.append((f"{filler} and then {words}", quote, f"{words} said someone; {filler}"))
    return rows  # 30 rows: rounds 0-2 train, 3 valid, 4 test


@pytest.mark.parametrize("method", ["bm25", "crm"])
def test_planted_quote_ranks_first(write_dataset, method):
    dataset = load_dataset(write_dataset(planted_rows(), {"train": [0, 18], "valid": [18, 24], "test": [24, 30]}))
    if method == "bm25":
        ranker = BM25Ranker(dataset.quotes, Language.EN)
    else:
        ranker = CRMRanker(len(dataset.quotes), dataset.split("train"), Language.EN)
    report = evaluate(ranker, dataset, "test", method)
    assert report.ranks.tolist() == [1] * 6
    assert report.overall["mrr"] == 1.0


def test_lexical_index_scores_exactly_as_bm25s():
    documents = [["cat", "sat", "mat", "cat"], ["dog", "sat"], [], ["bird"], ["cat", "dog", "bird", "fish"]]
    index = LexicalIndex(documents)
    reference = bm25s.BM25(method="lucene")
    reference.index(documents, show_progress=False)
    queries = [["cat", "cat", "dog"], ["fish"], ["bird", "sat"], ["unknown"]]
    scores = index.score(queries)
    assert scores.shape == (4, 5)
    for row, query in zip(scores, queries[:3]):
        np.testing.assert_allclose(row, reference.get_scores(query), rtol=1e-6)
    assert not scores[3].any()  # a query of unknown words scores nothing


def test_crm_scores_known_contexts_and_leaves_zero_shot_quotes_at_zero(write_dataset):
    rows = [
        ("red apples in the orchard", "q0", "fruit harvest"),
        ("green apples, ripe fruit", "q0", ""),
        ("the orchard fruit festival", "q1", "apples everywhere"),
        ("a boat on the lake", "q2", "sailing"),
        ("held out", "q3", "zero shot"),
    ]
    dataset = load_dataset(write_dataset(rows, {"train": [0, 4], "valid": [4, 5], "test": [5, 5]}))
    query = [Query("apples fruit", "orchard")]
    summed = CRMRanker(4, dataset.split("train"), Language.EN, Aggregate.SUM).score(query)[0]
    best = CRMRanker(4, dataset.split("train"), Language.EN, Aggregate.MAX).score(query)[0]
    context_scores = LexicalIndex(
        [lexical_tokens(f"{s.left} {s.right}", Language.EN) for s in dataset.split("train")]
    ).score([lexical_tokens("apples fruit orchard", Language.EN)])[0]
    assert summed[0] == pytest.approx(context_scores[0] + context_scores[1])
    assert best[0] == pytest.approx(max(context_scores[0], context_scores[1]))
    assert best[1] == pytest.approx(context_scores[2])
    assert summed[2] == 0 and summed[3] == 0  # unrelated quote, and a quote with no training context


def test_crm_needs_training_contexts():
    with pytest.raises(QuoterError, match="training split is empty"):
        CRMRanker(3, [], Language.EN)


def test_chinese_tokens_jieba_words_for_modern_and_characters_for_classical():
    modern = ["世界", "上", "唯一", "不变", "的", "就是", "变化"]
    assert lexical_tokens("世界上唯一不变的就是变化。", Language.ZH) == modern
    assert lexical_tokens("学而时习之，不亦说乎？", Language.ZH_CLASSICAL) == list("学而时习之不亦说乎")


def test_english_tokens_are_lowercased_words_without_stopwords():
    assert lexical_tokens("The Pen is mightier than the sword!", Language.EN) == ["pen", "mightier", "than", "sword"]


def test_bm25_finds_a_planted_chinese_quote():
    quotes = ["人不能两次踏进同一条河流", "世界上唯一不变的就是变化", "前途是光明的，道路是曲折的"]
    ranker = BM25Ranker(quotes, Language.ZH)
    scores = ranker.score([Query("投资者常说，市场唯一不变的", "就是变化，历史只能参考。")])
    assert int(np.argmax(scores[0])) == 1
