"""What a server accepts: request body size, contexts waiting for the model, Host names, idle connections, and
how long a request may take to arrive."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from quoter.serving.http.schemas import MAX_BATCH
from quoter.settings import at_least, setting

# Host header values of a loopback server; IPv6 literals come in brackets, as in the header.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ANY_HOST = "*"
EVERY_INTERFACE = ("0.0.0.0", "::")


@dataclass(frozen=True)
class ServerLimits:
    """What one server accepts; each default is chosen as follows.

    max_body_bytes: the largest request body (413 beyond); a full batch of 2 x 2,000-character contexts
    written in 6-byte \\u escapes is about 1.5 MB.
    max_queued_contexts: contexts waiting for the model or in it, beyond which a request gets 503 with a
    Retry-After of retry_after_s seconds; eight full batches, which single contexts overtake (micro_batching).
    allowed_hosts: the Host header values answered (400 otherwise), so that a web page cannot reach a local
    server through DNS rebinding; "*" answers any.
    keep_alive_s: how long an idle connection stays open; longer than clients keep idle connections (httpx
    5 s, aiohttp 15 s), so that the server never closes one just as a client reuses it.
    header_timeout_s: how long a request's line and headers may take to arrive, from the connection's opening
    or the request's first byte (then the connection is closed): they are a few hundred bytes, one packet,
    and 10 s leaves a poor mobile link several retransmissions, while a client that sends them byte by byte
    holds a connection no longer.
    body_timeout_s: how long a request body may take to arrive, from the end of the headers (then 408 and the
    connection is closed): the largest body, 2 MB, at 300 kbit/s, a slow mobile uplink.
    """

    max_body_bytes: int = setting(2 * 1024 * 1024, "The largest request body, in bytes; 413 beyond")
    max_queued_contexts: int = setting(
        8 * MAX_BATCH, "Contexts that may wait for the model; more get 503 with Retry-After"
    )
    retry_after_s: int = setting(1, "The Retry-After of a 503 for a full queue, in seconds")
    allowed_hosts: tuple[str, ...] = setting(
        LOOPBACK_HOSTS,
        "A Host header value to answer (repeatable; * for any), e.g. a proxy's name. Default: the loopback names on "
        "loopback, any on 0.0.0.0, else the --host address. Others get 400",
    )
    keep_alive_s: int = setting(
        75, "Seconds an idle connection stays open; keep it above clients' and proxies' idle timeouts"
    )
    header_timeout_s: int = setting(10, "Seconds a request's line and headers may take to arrive; then it is closed")
    body_timeout_s: int = setting(
        60, "Seconds a request body may take to arrive; then 408 and the connection is closed"
    )

    def __post_init__(self) -> None:
        at_least("max_body_bytes", self.max_body_bytes, 1)
        at_least("max_queued_contexts", self.max_queued_contexts, MAX_BATCH)  # the largest batch request
        at_least("retry_after_s", self.retry_after_s, 0)
        at_least("keep_alive_s", self.keep_alive_s, 1)
        at_least("header_timeout_s", self.header_timeout_s, 1)
        at_least("body_timeout_s", self.body_timeout_s, 1)


def is_loopback(address: str) -> bool:
    """Whether a server bound to this address is reachable from this machine only."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # a host name
        return False


def hosts_for_address(address: str) -> tuple[str, ...]:
    """The Host header values a server bound to this address answers by default: the loopback names on
    loopback, any on every interface, else the address itself."""
    if address in EVERY_INTERFACE:
        return (ANY_HOST,)
    if is_loopback(address):
        return LOOPBACK_HOSTS
    return (f"[{address}]",) if ":" in address else (address,)
