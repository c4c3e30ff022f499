"""A bundle ready to serve: contexts in, the top k quotes out with their scores and probabilities.

The probability of a quote is the softmax of its score over the FULL quote set (the paper's Eq. 4 and
Table 3), whatever k is. A hybrid bundle ranks by its fused score instead (see live_fusion.py); the
probability stays that of the dense score, and a quote added to it may come with usage examples, which its
context runtime encodes as it encodes queries. Concurrent requests share context-encoder calls through a
MicroBatcher.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from quoter.bundle import Bundle
from quoter.encoders.backend.context_runtime import ChosenRuntime, choose_runtime
from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.encoders.ranker import ContextVectors
from quoter.errors import QuoterError
from quoter.languages import Language
from quoter.quote_set import QuoteSet
from quoter.ranking import Query
from quoter.serving.live.live_fusion import LiveFusion
from quoter.serving.live.live_quotes import LiveQuotes, ScoredQuote, UsageLearning
from quoter.serving.micro_batching import MicroBatcher
from quoter.serving.settings import RecommenderConfig

# What Recommender(bundle) runs: the bundle's own encoder unchanged, as a library user expects; the commands
# run the runtime setting (RecommenderConfig), whose default chooses the fastest acceptable runtime.
BUNDLE_AS_IS = RecommenderConfig(runtime=ContextRuntime.TORCH)


def context_runtime(bundle: Bundle, config: RecommenderConfig, folder: Path | None) -> ChosenRuntime:
    """The runtime that encodes the bundle's contexts, as the config asks."""
    if not config.int8:
        return choose_runtime(bundle, config.runtime, folder)
    if config.runtime not in (ContextRuntime.AUTO, ContextRuntime.TORCH):
        raise QuoterError(
            f"int8 quantizes the torch runtime; for ONNX Runtime with int8 weights choose "
            f"{ContextRuntime.ONNX_INT8.value}, not int8 with {config.runtime.value}"
        )
    # Imported only when asked for: quantization pulls in torch.ao, which a plain server never needs.
    from quoter.encoders.backend.quantization import quantize_dynamic_int8

    return ChosenRuntime("torch-int8", quantize_dynamic_int8(bundle.context_encoder))


def place_context_encoder(bundle: Bundle, config: RecommenderConfig) -> None:
    """Move the bundle's context encoder to config.device (a GPU), where the torch runtime then runs it."""
    if config.device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise QuoterError(f"device: {config.device} asked for, and no CUDA GPU is visible to this process")
    if config.int8:
        raise QuoterError("int8 quantizes the context encoder for the CPU; on a GPU, leave int8 off")
    bundle.context_encoder.to(config.device)


def usage_learning(bundle: Bundle, context: ContextVectors, config: RecommenderConfig) -> UsageLearning:
    """How quotes added to a hybrid bundle's set learn from their usage examples: encoded by `context`, the
    runtime that encodes queries (knn compares them with queries), with the pull the bundle's own quotes got
    (0 for a bundle that learned none: a trained one), and each quote's hubness over the bundle's known
    contexts, where its fusion takes it off."""
    assert bundle.fusion is not None
    pull = float(bundle.info.get("usage_pull", 0.0))
    return UsageLearning(context, pull, config.encode_batch, bundle.known_vectors, bundle.fusion.hubness)


class Recommender:
    """Recommends quotes of one bundle's (live) quote set."""

    def __init__(
        self,
        bundle: Bundle,
        config: RecommenderConfig = BUNDLE_AS_IS,
        folder: Path | None = None,
        quotes: QuoteSet | None = None,
        state: Path | None = None,
        database: str | None = None,
    ) -> None:
        """`folder`: the bundle's folder; `quotes`: the quote set served (None: the bundle's own); `state`:
        where a saved live quote set is read and changes are saved (None: `folder`; both None: changes are
        kept in memory); `database`: instead, the URL of a PostgreSQL database that holds the live set of the
        bundle's language, shared with other processes (postgres_store)."""
        self.config = config
        self.language: Language = bundle.language
        self.info = bundle.info
        place_context_encoder(bundle, config)
        self.runtime = context_runtime(bundle, config, folder)
        self.context_encoder = self.runtime.encoder
        usage = None if bundle.fusion is None else usage_learning(bundle, self.context_encoder, config)
        if database is None:
            self.quotes = LiveQuotes.from_bundle(bundle, config.index, state or folder, quotes, usage)
        else:
            # Imported only here: psycopg comes with the scale extra.
            from quoter.serving.live.postgres_store import shared_quotes

            self.quotes = shared_quotes(database, bundle, config.index, quotes, usage)
        self.fusion = None if bundle.fusion is None else LiveFusion(bundle)
        self._batcher: MicroBatcher[tuple[Query, int], list[ScoredQuote]] = MicroBatcher(
            self._recommend_items, config.batching, self._most_tokens
        )

    def recommend(self, queries: Sequence[Query], k: int) -> list[list[ScoredQuote]]:
        """The top k quotes of each context, best first."""
        return self._recommend_items([(query, k) for query in queries])

    def _recommend_items(self, items: Sequence[tuple[Query, int]]) -> list[list[ScoredQuote]]:
        if any(k < 1 for _, k in items):
            raise QuoterError("k must be at least 1")
        queries = [query for query, _ in items]
        vectors = self.context_encoder.encode(queries, self.config.encode_batch)
        if self.fusion is not None:
            return self.fusion.top(queries, vectors, self.quotes.score_all(vectors), [k for _, k in items])
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
        """Stop batching requests, and let go of the live set's store (a lock, connections)."""
        await self._batcher.close()
        self.quotes.close()
