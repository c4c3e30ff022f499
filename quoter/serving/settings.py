"""The settings of what ranks (which `quoter batch` shares) and of `quoter serve`, each with its one default and
its help, read by quoter.settings from `--config FILE.yaml`, `--set key=value` and the commands' options.
Inputs (bundles, quote sets, files, the API key) are options only. Light to import: a bad setting is reported
before torch is loaded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from quoter.encoders.backend.runtime_config import RUNTIME_HELP, ContextRuntime
from quoter.errors import QuoterError
from quoter.serving.http.server_limits import ServerLimits, hosts_for_address
from quoter.serving.live.index_config import IndexConfig
from quoter.serving.micro_batching import BatchingConfig
from quoter.settings import at_least, setting

# Half the cores: the event loop, tokenizer and any local clients need CPU too, and on a busy machine
# more intra-op threads than free cores make each encoder call many times slower, not faster.
DEFAULT_THREADS = max(1, (os.cpu_count() or 2) // 2)
HIGHEST_PORT = 65535


@dataclass(frozen=True)
class RecommenderConfig:
    """What ranks: the context runtime, int8, quote search, threads, and how concurrent requests are encoded
    together (batching). The commands run the settings as they are; a library user's Recommender(bundle)
    runs the bundle's own encoder unchanged unless given a config (recommender.BUNDLE_AS_IS)."""

    runtime: ContextRuntime = setting(ContextRuntime.AUTO, RUNTIME_HELP)
    int8: bool = setting(
        False,
        "Quantize the context encoder to int8 (torch): faster on CPU, scores differ slightly; one context per "
        "call, so that its vector does not depend on others",
    )
    index: IndexConfig = field(default_factory=IndexConfig)
    threads: int = setting(DEFAULT_THREADS, "CPU threads per encoder call and search: torch, ONNX Runtime, faiss")
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    encode_batch: int = setting(64, "Contexts per encoder forward pass; a file is ranked in such steps")

    def __post_init__(self) -> None:
        at_least("threads", self.threads, 1)
        at_least("encode_batch", self.encode_batch, 1)
        # BatchingConfig leaves its bounds to the settings that make it.
        at_least("batching.max_batch", self.batching.max_batch, 1)
        at_least("batching.max_wait_ms", self.batching.max_wait_ms, 0)
        at_least("batching.max_batch_tokens", self.batching.max_batch_tokens, 1)


@dataclass(frozen=True)
class ServeConfig(RecommenderConfig):
    """`quoter serve`: what ranks (RecommenderConfig), where it listens, and what a request may be (limits;
    allowed_hosts follows host unless it is set, see complete_serve_config)."""

    host: str = setting("127.0.0.1", "Address to listen on; 0.0.0.0 for every interface")
    port: int = setting(8000, "Port to listen on")
    limits: ServerLimits = field(default_factory=ServerLimits)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 1 <= self.port <= HIGHEST_PORT:
            raise QuoterError(f"port: must be from 1 to {HIGHEST_PORT}, got {self.port}")


def complete_serve_config(data: dict[str, Any]) -> None:
    """Without limits.allowed_hosts, the server answers the Host names of its address (hosts_for_address)."""
    if data.get("limits") is None:
        data["limits"] = {}
    if isinstance(data["limits"], dict) and "allowed_hosts" not in data["limits"]:
        data["limits"]["allowed_hosts"] = list(hosts_for_address(str(data.get("host", ServeConfig.host))))
