"""The demo page's security headers: a Content-Security-Policy that runs only the page's own inline script
and style (allowed by their hashes) and talks only to this server, and no framing by other sites."""

from __future__ import annotations

import base64
import hashlib
from html.parser import HTMLParser

INLINE_CODE_TAGS = ("script", "style")


class _InlineCode(HTMLParser):
    """Collects the text of each inline <script> and <style> element, as the browser hashes it."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, list[str]] = {tag: [] for tag in INLINE_CODE_TAGS}
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in INLINE_CODE_TAGS:
            self._open = tag
            self.texts[tag].append("")

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self.texts[self._open][-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == self._open:
            self._open = None


def _sources(texts: list[str]) -> str:
    hashes = [base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") for text in texts]
    return " ".join(f"'sha256-{digest}'" for digest in hashes) or "'none'"


def security_headers(page: str) -> dict[str, str]:
    """The headers to serve this HTML page with."""
    parser = _InlineCode()
    parser.feed(page)
    parser.close()
    policy = [
        "default-src 'self'",
        f"script-src {_sources(parser.texts['script'])}",
        f"style-src {_sources(parser.texts['style'])}",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
    return {
        "Content-Security-Policy": "; ".join(policy),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
