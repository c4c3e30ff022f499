"""The language of a quote set is guessed sensibly, and an explicit choice always wins."""

from quoter.languages import Language, choose_language, guess_language


def test_english_quotes_are_english():
    assert guess_language(["Brevity is the soul of wit.", "Know thyself"])[0] is Language.EN


def test_classical_lines_are_classical():
    assert guess_language(["学而时习之，不亦说乎", "知之为知之，不知为不知，是知也"])[0] is Language.ZH_CLASSICAL


def test_modern_sayings_are_modern():
    assert guess_language(["失败是成功之母", "世界上唯一不变的就是变化", "这是我们的时代"])[0] is Language.ZH


def test_idioms_cited_in_modern_text_are_modern_chinese():
    idioms = ["半途而废", "一帆风顺", "自相矛盾", "学而时习之，不亦说乎"]
    assert guess_language(idioms)[0] is Language.ZH_CLASSICAL  # on their own, idioms look classical
    contexts = ["他做事总是这样，我们都知道他会", "这次比赛他们的表现真是"]
    assert choose_language(None, None, idioms + contexts)[0] is Language.ZH


def test_requested_language_then_part_then_guess():
    quotes = ["Know thyself"]
    assert choose_language(Language.ZH, "english", quotes)[0] is Language.ZH
    assert choose_language(None, "ancient_chinese", quotes)[0] is Language.ZH_CLASSICAL
    assert choose_language(None, None, quotes) == (
        Language.EN,
        "guessed from the quotes and contexts: 11 Latin letters against 0 Chinese characters",
    )
