"""The settings of `quoter serve`, and of what ranks (which `quoter batch` shares), each with its one default,
read by quoter.settings from `--config FILE.yaml`, `--set key=value` and the commands' options. Inputs
(bundles, quote sets, files, the API key) are options only. Light to import: a bad setting is reported
before torch is loaded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quoter.encoders.backend.runtime_config import ContextRuntime
from quoter.errors import QuoterError
from quoter.serving.http.server_limits import ServerLimits, hosts_for_address
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.micro_batching import BatchingConfig
from quoter.settings import at_least

if TYPE_CHECKING:
    from quoter.serving.recommender import RecommenderConfig

# Half the cores: the event loop, tokenizer and any local clients need CPU too, and on a busy machine
# more intra-op threads than free cores make each encoder call many times slower, not faster.
DEFAULT_THREADS = max(1, (os.cpu_count() or 2) // 2)
HIGHEST_PORT = 65535


@dataclass(frozen=True)
class RecommenderSettings:
    """What ranks: runtime, what runs the context encoder (auto: the fastest whose measured loss of MRR is
    small; see ContextRuntime); int8: the torch runtime with int8 linear layers; index: exact or approximate
    quote search; threads: CPU threads per encoder call and search (torch, ONNX Runtime, faiss)."""

    runtime: ContextRuntime = ContextRuntime.AUTO
    int8: bool = False
    index: IndexConfig = field(default_factory=IndexConfig)
    threads: int = DEFAULT_THREADS

    def __post_init__(self) -> None:
        at_least("threads", self.threads, 1)

    def recommender_config(self, batching: BatchingConfig = BatchingConfig()) -> RecommenderConfig:
        # Imported here: the recommender pulls in torch, which reading the settings should not wait for.
        from quoter.serving.recommender import RecommenderConfig

        return RecommenderConfig(runtime=self.runtime, int8=self.int8, index=self.index, batching=batching)


@dataclass(frozen=True)
class ServeSettings(RecommenderSettings):
    """`quoter serve`: where it listens (host, port), how concurrent requests are encoded together
    (batching) and what a request may be (limits; allowed_hosts follows host unless it is set, see
    complete_serve_settings)."""

    host: str = "127.0.0.1"
    port: int = 8000
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    limits: ServerLimits = field(default_factory=ServerLimits)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.port <= HIGHEST_PORT:
            raise QuoterError(f"port: must be from 1 to {HIGHEST_PORT}, got {self.port}")
        # BatchingConfig leaves its bounds to the settings that make it.
        at_least("batching.max_batch", self.batching.max_batch, 1)
        at_least("batching.max_wait_ms", self.batching.max_wait_ms, 0)
        at_least("batching.max_batch_tokens", self.batching.max_batch_tokens, 1)


def complete_serve_settings(data: dict[str, Any]) -> None:
    """Without limits.allowed_hosts, the server answers the Host names of its address (hosts_for_address)."""
    if data.get("limits") is None:
        data["limits"] = {}
    if isinstance(data["limits"], dict) and "allowed_hosts" not in data["limits"]:
        data["limits"]["allowed_hosts"] = list(hosts_for_address(str(data.get("host", ServeSettings.host))))
