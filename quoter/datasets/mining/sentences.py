"""Split quotes into sentences: stanza where its models are installed, else a rule-based splitter."""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from quoter.languages import Language

STANZA_LANGUAGES = {Language.EN: "en", Language.ZH: "zh-hans", Language.ZH_CLASSICAL: "lzh"}

# English: a sentence ends at . ! or ? (closing quotes and brackets stay with it) before white space and
# a capital, digit, quote or bracket; abbreviations and initials ("Mr.", "J. M. Barrie") do not end one.
EN_BOUNDARY = re.compile(r"""[.!?]+["'”’)\]]*(?=\s+["'“‘(\[]?[A-Z0-9])""")
EN_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev gen col capt lt sgt hon messrs mme mlle vs etc cf viz vol no pp mt ft esq".split()
)
# Chinese: a sentence ends at 。！？ or an ellipsis, with its closing quotes and brackets; classical
# Chinese quotes are also cited clause by clause at ；, as the classical quote lists are cut.
ZH_BOUNDARY = re.compile(r"[。！？!?…]+[”’」』）)》]*")
ZH_CLASSICAL_BOUNDARY = re.compile(r"[。！？!?；;…]+[”’」』）)》]*")

SentenceSplitter = Callable[[str], list[str]]


@dataclass(frozen=True)
class ChosenSplitter:
    """The splitter that runs, and a line saying which one and why, for the output."""

    split: SentenceSplitter
    description: str


def split_english(text: str) -> list[str]:
    """Rule-based English sentence splitter."""
    sentences, start = [], 0
    for boundary in EN_BOUNDARY.finditer(text):
        words = text[start : boundary.start()].split()
        last_word = words[-1].lower().strip("\"'“‘(") if words else ""
        if last_word in EN_ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
            continue
        sentences.append(text[start : boundary.end()].strip())
        start = boundary.end()
    sentences.append(text[start:].strip())
    return [sentence for sentence in sentences if sentence]


def chinese_splitter(boundary: re.Pattern[str]) -> SentenceSplitter:
    """Rule-based Chinese sentence splitter that cuts after each match of `boundary`."""

    def split(text: str) -> list[str]:
        sentences, start = [], 0
        for match in boundary.finditer(text):
            sentences.append(text[start : match.end()].strip())
            start = match.end()
        sentences.append(text[start:].strip())
        return [sentence for sentence in sentences if sentence]

    return split


RULE_BASED = {
    Language.EN: split_english,
    Language.ZH: chinese_splitter(ZH_BOUNDARY),
    Language.ZH_CLASSICAL: chinese_splitter(ZH_CLASSICAL_BOUNDARY),
}


def stanza_models_dir(language: Language) -> Path | None:
    """The folder of stanza's tokenizer models for `language`, if they are installed."""
    # Found the way stanza finds them, without importing stanza (and torch) just to look.
    if importlib.util.find_spec("stanza") is None:
        return None
    resources = Path(os.environ.get("STANZA_RESOURCES_DIR", Path.home() / "stanza_resources"))
    folder = resources / STANZA_LANGUAGES[language] / "tokenize"
    return folder if folder.is_dir() and any(folder.iterdir()) else None


def stanza_splitter(language: Language) -> SentenceSplitter:
    """stanza's tokenizer as a sentence splitter; needs its models installed (no download is tried)."""
    import stanza

    pipeline = stanza.Pipeline(
        lang=STANZA_LANGUAGES[language], processors="tokenize", download_method=None, verbose=False
    )

    def split(text: str) -> list[str]:
        return [sentence.text for sentence in pipeline(text).sentences if sentence.text.strip()]

    return split


def choose_splitter(language: Language, use_stanza: bool = True) -> ChosenSplitter:
    """stanza when asked for and its models for `language` are installed, else the rule-based splitter."""
    rule_based = f"rule-based {language.value} sentence splitter"
    if not use_stanza:
        return ChosenSplitter(RULE_BASED[language], f"{rule_based} (stanza not asked for)")
    models = stanza_models_dir(language)
    if models is None:
        return ChosenSplitter(
            RULE_BASED[language], f"{rule_based} (stanza models for '{STANZA_LANGUAGES[language]}' are not installed)"
        )
    try:
        split = stanza_splitter(language)
    except Exception as error:  # stanza raises many kinds; any failure means: use the fallback
        return ChosenSplitter(RULE_BASED[language], f"{rule_based} (stanza failed to load: {error})")
    return ChosenSplitter(split, f"stanza tokenizer, models in {models}")
