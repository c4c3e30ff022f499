"""Sememes from real OpenHowNet, for users who have downloaded its resources (OpenHowNet.download())."""

from __future__ import annotations

import contextlib
import io
from collections import defaultdict
from pathlib import Path

from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.sememes.lexicon import TableLexicon, table_from_names

# The files HowNetDict reads from OpenHowNet's resource folder.
RESOURCE_FILES = ("sememe_all", "sememe_triples_taxonomy.txt", "HowNet_dict_complete")
DOWNLOAD_HINT = "run `quoter sememes download-openhownet` once with network access, or give a lexicon file"


def openhownet_resource_folder() -> Path:
    """Where OpenHowNet keeps its downloaded resources (~/.openhownet/resources)."""
    from OpenHowNet import Download

    return Path(Download.OPENHOWNET_RESOURCE_PATH) / "resources"


def download_openhownet() -> Path:
    """Download OpenHowNet's resources (needs network); failure is a QuoterError saying what to do."""
    import OpenHowNet

    try:
        OpenHowNet.download()
    except Exception as error:  # requests, zipfile and OS errors all mean the same to the user here
        raise QuoterError(
            f"downloading the OpenHowNet resources failed ({error.__class__.__name__}: {error}); "
            "check the network, or use a word-sememe lexicon file instead"
        ) from error
    return openhownet_resource_folder()


def load_openhownet(language: Language) -> TableLexicon:
    """A table of the language's HowNet words (English or Chinese), one sememe set per word chosen from its
    senses by consensus; sememes are named 'English|中文' as in HowNet."""
    folder = openhownet_resource_folder()
    missing = [name for name in RESOURCE_FILES if not (folder / name).is_file()]
    if missing:
        raise QuoterError(f"OpenHowNet resources are missing from {folder} ({', '.join(missing)}): {DOWNLOAD_HINT}")
    import OpenHowNet

    # HowNetDict prints progress to stdout, which would mix with command output such as JSON.
    with contextlib.redirect_stdout(io.StringIO()):
        hownet = OpenHowNet.HowNetDict()
    if not hasattr(hownet, "sense_dic"):
        raise QuoterError(f"OpenHowNet could not read its resources in {folder}: {DOWNLOAD_HINT}")
    senses: dict[str, list[frozenset[str]]] = defaultdict(list)
    for sense in sorted(hownet.get_all_senses(), key=lambda sense: int(sense.No)):
        word = sense.en_word.strip().lower() if language is Language.EN else sense.zh_word.strip()
        if word:
            senses[word].append(frozenset(sememe.en_zh for sememe in sense.sememes))
    return table_from_names(senses, f"OpenHowNet ({language.value} words) in {folder}")
