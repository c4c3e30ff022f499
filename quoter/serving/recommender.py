"""A bundle ready to serve: contexts in, the top k quotes out with their scores and probabilities.

The probability of a quote is the softmax of its score over the FULL quote set (the paper's Eq. 4 and
Table 3), whatever k is. Concurrent requests share context-encoder calls through a MicroBatcher.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from quoter.bundle import Bundle
from quoter.encoders.context_encoder import ContextEncoder
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.ranking import Query
from quoter.serving.index_config import IndexConfig
from quoter.serving.live_quotes import LiveQuotes, ScoredQuote
from quoter.serving.micro_batching import BatchingConfig, MicroBatcher


@dataclass(frozen=True)
class RecommenderConfig:
    """int8: quantize the context encoder's linear layers to int8 (faster on CPU, slightly different
    scores); index: exact or approximate quote search; batching: how concurrent requests are grouped;
    encode_batch: contexts per encoder forward pass (a file is ranked in such steps)."""

    int8: bool = False
    index: IndexConfig = field(default_factory=IndexConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    encode_batch: int = 64


def quantized(encoder: ContextEncoder) -> ContextEncoder:
    """The context encoder with int8 linear layers."""
    # Imported only when asked for: quantization pulls in torch.ao, which a plain server never needs.
    from quoter.encoders.quantization import quantize_dynamic_int8

    return quantize_dynamic_int8(encoder)


class Recommender:
    """Recommends quotes of one bundle's (live) quote set."""

    def __init__(
        self, bundle: Bundle, config: RecommenderConfig = RecommenderConfig(), folder: Path | None = None
    ) -> None:
        """`folder`: the bundle's folder, where a saved live quote set is read and changes are saved; None
        keeps changes in memory."""
        self.config = config
        self.language: Language = bundle.language
        self.info = bundle.info
        self.context_encoder = quantized(bundle.context_encoder) if config.int8 else bundle.context_encoder
        self.quotes = LiveQuotes.from_bundle(bundle, config.index, folder)
        self._batcher: MicroBatcher[tuple[Query, int], list[ScoredQuote]] = MicroBatcher(
            self._recommend_items, config.batching, self._most_tokens
        )

    def recommend(self, queries: Sequence[Query], k: int) -> list[list[ScoredQuote]]:
        """The top k quotes of each context, best first."""
        return self._recommend_items([(query, k) for query in queries])

    def _recommend_items(self, items: Sequence[tuple[Query, int]]) -> list[list[ScoredQuote]]:
        if any(k < 1 for _, k in items):
            raise QuoterError("k must be at least 1")
        vectors = self.context_encoder.encode([query for query, _ in items], self.config.encode_batch)
        return self.quotes.search(vectors, [k for _, k in items])

    def _most_tokens(self, item: tuple[Query, int]) -> int:
        # Its tokens, estimated from above: a token covers at least one character (only the few special tokens
        # cover none), and the encoder reads at most max_length tokens.
        query, _ = item
        return min(len(query.left) + len(query.right), self.context_encoder.config.max_length)

    async def recommend_async(self, requests: Sequence[tuple[Query, int]]) -> list[list[ScoredQuote]]:
        """The top k quotes of each (context, k), encoded together with the other requests waiting now."""
        return await self._batcher.submit(requests)

    @property
    def batch_sizes(self) -> Counter[int]:
        """How many encoder calls made for `recommend_async` so far served each number of requests."""
        return self._batcher.batch_sizes

    async def close(self) -> None:
        """Stop batching requests."""
        await self._batcher.close()
