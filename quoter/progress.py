"""Progress bars for long work: drawn on stderr when it is a terminal, silent when it is a file or a pipe."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm


def progress_bar(iterable: Iterable[Any] | None = None, *, enabled: bool = True, **options: Any) -> tqdm:
    """A tqdm bar on stderr that draws only when `enabled` and stderr is a terminal, so logs and redirected
    output never fill with bars; `options` go to tqdm (total, desc, unit, ...)."""
    # Looked up at each call, since stderr may be replaced.
    return tqdm(iterable, file=sys.stderr, disable=not bars_drawn(enabled), **options)


def bars_drawn(enabled: bool = True) -> bool:
    """Whether a bar is drawn now: when `enabled` and stderr is a terminal. The libraries that take a flag
    for their own bars (Lightning's) get it from here too."""
    return enabled and sys.stderr.isatty()
