"""Traditional to simplified Chinese with OpenCC, so traditional quotes and corpora match simplified ones."""

from __future__ import annotations

from collections.abc import Callable

from quoter.errors import QuoterError


def traditional_to_simplified() -> Callable[[str], str]:
    """A converter from traditional to simplified Chinese (OpenCC's t2s).

    Works with either PyPI package that provides the `opencc` module: `opencc` (C++ bindings, fast) or
    `opencc-python-reimplemented` (pure Python); their configuration names differ.
    """
    try:
        import opencc
    except ImportError:
        raise QuoterError(
            "converting traditional to simplified Chinese needs OpenCC: pip install opencc-python-reimplemented"
        ) from None
    for config_name in ("t2s", "t2s.json"):
        try:
            converter = opencc.OpenCC(config_name)
        except Exception:  # each package rejects the other's configuration name in its own way
            continue
        return converter.convert
    raise QuoterError("OpenCC is installed but has no 't2s' (traditional to simplified) configuration")
