"""The settings of what ranks (which `quoter batch` shares) and of `quoter serve`, each with its one default and
its help, read by quoter.settings from `--config FILE.yaml`, `--set key=value` and the commands' options.
Inputs (bundles, quote sets, files, the API key) are options only. Light to import: a bad setting is reported
before torch is loaded."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
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
    device: str = setting("cpu", "Where the context encoder runs: cpu, or cuda (a GPU, with the torch runtime)")

    def __post_init__(self) -> None:
        at_least("threads", self.threads, 1)
        at_least("encode_batch", self.encode_batch, 1)
        if self.device != "cpu" and not self.device.startswith("cuda"):
            raise QuoterError(f"device: expected cpu or cuda (cuda:N for one GPU of several), got {self.device!r}")
        # BatchingConfig leaves its bounds to the settings that make it.
        at_least("batching.max_batch", self.batching.max_batch, 1)
        at_least("batching.max_wait_ms", self.batching.max_wait_ms, 0)
        at_least("batching.max_batch_tokens", self.batching.max_batch_tokens, 1)


class EngineKind(str, Enum):
    """local: one process, uvicorn; ray: replicas on Ray Serve (quoter.serving.ray_serve)."""

    LOCAL = "local"
    RAY = "ray"


@dataclass(frozen=True)
class ServeEngineConfig:
    """What runs the server: one process, or Ray Serve replicas, a fixed number of them or as many as the load
    asks for (autoscale, "MIN:MAX"), on a local Ray cluster or on the one at `address`."""

    kind: EngineKind = setting(
        EngineKind.LOCAL, "local: one process; ray: replicas on Ray Serve (pip install 'quoter[scale]')"
    )
    address: str | None = setting(
        None, "With ray: the Ray cluster to run on, e.g. ray://HOST:10001 or auto. Default: a local one"
    )
    replicas: int = setting(1, "With ray: how many replicas serve, each with its own encoder and index")
    autoscale: str | None = setting(
        None, "With ray: MIN:MAX replicas, as many as the requests under way ask for (instead of --replicas)"
    )

    def __post_init__(self) -> None:
        at_least("replicas", self.replicas, 1)
        if self.kind is EngineKind.LOCAL:
            ray_only = {"replicas": self.replicas > 1, "autoscale": self.autoscale, "address": self.address}
            given = [name for name, value in ray_only.items() if value]
            if given:
                raise QuoterError(f"{given[0]}: needs the ray engine (--engine ray)")
        if self.autoscale is not None and self.replicas > 1:
            raise QuoterError("autoscale: give it or replicas, not both")
        self.scale_range()  # a bad MIN:MAX is reported with the other settings

    def scale_range(self) -> tuple[int, int]:
        """The fewest and the most replicas that may serve: (replicas, replicas) without autoscale."""
        if self.autoscale is None:
            return self.replicas, self.replicas
        low, sep, high = self.autoscale.partition(":")
        # YAML reads an unquoted 1:4 as a base-60 number (64): hence the hint to quote it.
        if not (sep and low.strip().isdigit() and high.strip().isdigit()) or not 1 <= int(low) <= int(high):
            raise QuoterError(
                f"autoscale: expected MIN:MAX replicas with 1 <= MIN <= MAX, e.g. 1:4 (quoted in YAML), "
                f"got {self.autoscale!r}"
            )
        return int(low), int(high)


@dataclass(frozen=True)
class ServeConfig(RecommenderConfig):
    """`quoter serve`: what ranks (RecommenderConfig), where it listens, what a request may be (limits;
    allowed_hosts follows host unless it is set, see complete_serve_config), and what runs it (engine)."""

    host: str = setting("127.0.0.1", "Address to listen on; 0.0.0.0 for every interface")
    port: int = setting(8000, "Port to listen on")
    limits: ServerLimits = field(default_factory=ServerLimits)
    engine: ServeEngineConfig = field(default_factory=ServeEngineConfig)

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
