"""What every recommendation method is: something that scores the whole quote set for a query context."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Query:
    """A query context: the text before the gap and the text after it (empty for autocomplete)."""

    left: str
    right: str = ""


class Ranker(Protocol):
    """Scores every quote of a fixed quote set for each query; a higher score means a better fit."""

    def score(self, queries: Sequence[Query]) -> np.ndarray:
        """Return an array of shape (len(queries), number of quotes)."""
        ...
