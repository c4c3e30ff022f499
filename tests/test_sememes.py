"""Sememe lexicons behind one interface: word files, the English bridge with lemmatisation, OpenHowNet,
token alignment by offsets, and coverage."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from quoter.errors import InputError, QuoterError
from quoter.languages import Language
from quoter.sememes.alignment import SememeAnnotator, SememeSpan, token_sememes
from quoter.sememes.coverage import measure_coverage
from quoter.sememes.english import (
    EnglishLexicon,
    SimplemmaLemmatizer,
    bridge_english,
    gloss_word,
    read_lemma_file,
)
from quoter.sememes.lexicon import TableLexicon, consensus
from quoter.sememes.sources import LexiconConfig, load_lexicon
from quoter.sememes.word_file import read_word_sememe_file
from tests.encoder_fixtures import tiny_model, tiny_tokenizer

WORD_FILE = "\n标志 \n知\n知道 \n认识\n知道 认识 \n解\n分离 解释 \n学习\n学 \n学\n学 \n"
CEDICT = (
    "# CC-CEDICT header\n"
    "知 知 [zhi1] /to know/to be aware/\n"
    "認識 认识 [ren4 shi5] /to know/to recognize/\n"
    "解 解 [jie3] /to divide/to know/to explain/\n"
    "學習 学习 [xue2 xi2] /to learn/to study/\n"
    "貓 猫 [mao1] /cat/CL:隻|只[zhi1]/\n"
)


def names(lexicon, ids):
    return {lexicon.names[i] for i in ids}


@pytest.fixture
def word_file(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text(WORD_FILE, encoding="utf-8")
    return path


@pytest.fixture
def cedict(tmp_path):
    path = tmp_path / "cedict.txt"
    path.write_text(CEDICT, encoding="utf-8")
    return path


def test_a_word_file_gives_each_word_its_sememes(word_file):
    lexicon = read_word_sememe_file(word_file)
    assert names(lexicon, lexicon.sememes("认识")) == {"知道", "认识"}
    assert names(lexicon, lexicon.sememes("学")) == {"学"}
    assert lexicon.sememes("没有") == frozenset() and lexicon.sememes("") == frozenset()
    assert len(lexicon) == 5  # the blank first word is skipped
    assert lexicon.names == tuple(sorted(lexicon.names))


@pytest.mark.parametrize(
    "text,message,line",
    [("知\n知道 \n认识\n", "no sememe line", 3), ("知\n知道 \n知\n认识 \n", "second time", 3)],
)
def test_a_broken_word_file_is_an_error_with_its_line(tmp_path, text, message, line):
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=message) as error:
        read_word_sememe_file(path)
    assert error.value.line == line


def test_consensus_keeps_what_most_senses_share_else_the_best_sense():
    assert consensus([frozenset("ab"), frozenset("ac"), frozenset("ad")]) == frozenset("a")
    assert consensus([frozenset("ab"), frozenset("cd")]) == frozenset("ab")
    assert consensus([]) == frozenset()


@pytest.mark.parametrize(
    "gloss,word",
    [
        ("to know", "know"),
        ("(literary) to know", "know"),
        ("cat", "cat"),
        ("a well-known fact", None),
        ("CL:隻|只[zhi1]", None),
        ("variant of 知[zhi1]", None),
    ],
)
def test_only_single_word_glosses_bridge_to_english(gloss, word):
    assert gloss_word(gloss) == word


def test_the_english_bridge_takes_the_translations_consensus_and_lemmatises(word_file, cedict, tmp_path):
    lemmas = tmp_path / "lemmas.txt"
    lemmas.write_text("know\tknew\nknow\tknows\nlearn\tlearnt", encoding="utf-8")
    bridged = bridge_english(read_word_sememe_file(word_file), cedict)
    # 知, 认识 and 解 all translate "know"; only 知道 is shared by most of them.
    assert names(bridged, bridged.sememes("know")) == {"知道"}
    assert names(bridged, bridged.sememes("learn")) == {"学"}
    assert bridged.sememes("cat") == frozenset()  # 猫 has no sememes in this lexicon
    english = EnglishLexicon(bridged, read_lemma_file(lemmas))
    assert names(english, english.sememes("Knew")) == {"知道"}
    assert names(english, english.sememes("learnt")) == {"学"}
    assert english.sememes("knowing") == frozenset()  # not in the lemma file
    assert names(english, EnglishLexicon(bridged, SimplemmaLemmatizer()).sememes("knowing")) == {"知道"}


def test_load_lexicon_bridges_english_only(word_file, cedict):
    config = LexiconConfig(str(word_file), cedict=cedict)
    chinese = load_lexicon(config, Language.ZH_CLASSICAL)
    english = load_lexicon(config, Language.EN)
    assert chinese.sememes("认识") and not chinese.sememes("know")
    assert english.sememes("knows") and english.names == chinese.names


def test_a_broken_lemma_or_dictionary_file_is_an_error_with_its_line(tmp_path, word_file):
    bad_lemmas = tmp_path / "lemmas.txt"
    bad_lemmas.write_text("know\tknew\nbroken line\n", encoding="utf-8")
    with pytest.raises(InputError, match="lemma<TAB>form") as error:
        read_lemma_file(bad_lemmas)
    assert error.value.line == 2
    bad_cedict = tmp_path / "cedict.txt"
    bad_cedict.write_text("# header\n知 知 /to know/\n", encoding="utf-8")
    with pytest.raises(InputError, match="CC-CEDICT") as error:
        bridge_english(read_word_sememe_file(word_file), bad_cedict)
    assert error.value.line == 2


def fake_openhownet(folder, monkeypatch):
    """OpenHowNet's resource files, in its own formats, with two senses of 'know' and one of '猫'."""
    from OpenHowNet import Download

    resources = folder / "resources"
    resources.mkdir(parents=True)
    sememes = {"know|知道": 5, "understand|理解": 3, "livestock|牲畜": 2, "human|人": 9}
    (resources / "sememe_all").write_bytes(pickle.dumps(sememes))
    (resources / "sememe_triples_taxonomy.txt").write_text("know|知道 hypernym understand|理解\n", encoding="utf-8")
    senses = {
        "1": {
            "No": "1",
            "en_word": "know",
            "en_grammar": "verb",
            "ch_word": "知道",
            "ch_grammar": "verb",
            "Def": "{know|知道}",
        },
        "2": {
            "No": "2",
            "en_word": "know",
            "en_grammar": "verb",
            "ch_word": "认识",
            "ch_grammar": "verb",
            "Def": "{know|知道:content={understand|理解}}",
        },
        "3": {
            "No": "3",
            "en_word": "cat",
            "en_grammar": "noun",
            "ch_word": "猫",
            "ch_grammar": "noun",
            "Def": "{livestock|牲畜}",
        },
    }
    (resources / "HowNet_dict_complete").write_bytes(pickle.dumps(senses))
    monkeypatch.setattr(Download, "OPENHOWNET_RESOURCE_PATH", str(folder))


def test_openhownet_resources_give_english_and_chinese_lexicons(tmp_path, monkeypatch):
    fake_openhownet(tmp_path / "home", monkeypatch)
    english = load_lexicon(LexiconConfig("openhownet"), Language.EN)
    assert names(english, english.sememes("knew")) == {"know|知道"}  # lemmatised; consensus of the two senses
    chinese = load_lexicon(LexiconConfig("openhownet"), Language.ZH)
    assert names(chinese, chinese.sememes("猫")) == {"livestock|牲畜"}
    assert names(chinese, chinese.sememes("认识")) == {"know|知道", "understand|理解"}


def test_missing_openhownet_resources_say_what_to_do(tmp_path, monkeypatch):
    from OpenHowNet import Download

    monkeypatch.setattr(Download, "OPENHOWNET_RESOURCE_PATH", str(tmp_path))
    with pytest.raises(QuoterError, match="download-openhownet"):
        load_lexicon(LexiconConfig("openhownet"), Language.ZH)


def test_a_token_covering_two_words_gets_the_average_of_their_means():
    spans = [SememeSpan(0, 2, frozenset({0, 1})), SememeSpan(2, 3, frozenset({2})), SememeSpan(5, 6, frozenset({3}))]
    offsets = [(0, 0), (0, 3), (3, 5), (5, 6), (0, 0)]
    terms = token_sememes(offsets, [1, 0, 0, 0, 1], spans)
    assert sorted((t.token, t.sememe, t.weight) for t in terms) == [
        (1, 0, 0.25),
        (1, 1, 0.25),
        (1, 2, 0.5),
        (3, 3, 1.0),
    ]


def test_coverage_counts_words_and_tokens_that_receive_sememes(tmp_path):
    tokenizer = tiny_tokenizer(tmp_path / "tok")
    table = {"学习": frozenset({0}), "喜": frozenset({1})}
    annotator = SememeAnnotator(TableLexicon(("a", "b"), table, "test"), Language.ZH)
    coverage = measure_coverage(["我们喜欢学习", "学习"], annotator, tokenizer, max_length=32)
    # words: 我们 喜欢 学习 | 学习; tokens: 我 们 喜 欢 学 习 | 学 习
    assert (coverage.quotes, coverage.words, coverage.words_covered, coverage.words_by_characters) == (2, 4, 3, 1)
    assert (coverage.tokens, coverage.tokens_covered) == (8, 5)


def test_the_coverage_command_prints_word_and_token_shares(tmp_path, word_file, cedict):
    model_folder = tmp_path / "model"
    tokenizer = tiny_tokenizer(model_folder)
    tiny_model(tokenizer).save_pretrained(model_folder)
    tokenizer.save_pretrained(model_folder)
    data = tmp_path / "data.txt"
    data.write_text("我们\t学习\t的\n他\t认识\t了\n", encoding="utf-8")

    def coverage(lexicon):
        command = [
            sys.executable,
            "-m",
            "quoter",
            "sememes",
            "coverage",
            "--data",
            str(data),
            "--lexicon",
            str(lexicon),
            "--model",
            str(model_folder),
        ]
        return subprocess.run(command, capture_output=True, text=True)

    result = coverage(word_file)
    assert result.returncode == 0, result.stderr
    assert "words with sememes: 2 of 2 (100.0%)" in result.stdout
    assert "tokens with sememes: 4 of 4 (100.0%)" in result.stdout
    missing = coverage(tmp_path / "none.txt")
    assert missing.returncode == 2 and "lexicon file not found" in missing.stderr
    assert "Traceback" not in missing.stderr
