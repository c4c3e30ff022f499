"""A hash of everything a context encoder's vectors depend on: its weights, settings and tokenizer, so that a
cache keyed by it is never stale."""

from __future__ import annotations

import json

import torch
import xxhash

from quoter.encoders.context_encoder import ContextEncoder

# A fast tokenizer's state that each call may change, which the vectors do not depend on: left out of the key.
CALL_STATE = ("truncation", "padding")


def encoder_digest(encoder: ContextEncoder, digest: xxhash.xxh3_128) -> xxhash.xxh3_128:
    """`digest` updated with the encoder's settings, tokenizer and every weight. Every weight is read at every
    start: XXH3 (128 bits) reads the 470 MB of multilingual-e5-small in a few hundredths of a second, where
    SHA-256 took half a second (collisions are as unlikely; nobody forges a cache key, since whoever can write
    the cache can write what it holds)."""
    settings = {
        "max_length": encoder.max_length,
        "pooling": encoder.config.pooling.to_json(),
        "gap": encoder.config.gap.value,
    }
    digest.update(json.dumps(settings, sort_keys=True).encode("utf-8"))
    digest.update(saved_tokenizer(encoder.tokenizer.backend_tokenizer.to_str()).encode("utf-8"))
    for name, tensor in sorted(encoder.model.state_dict().items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest


def saved_tokenizer(text: str) -> str:
    """A fast tokenizer's JSON text (`to_str()`) less its CALL_STATE. The tokenizers library writes those keys
    first, after "version", so they are cut out of the text; parsing and writing back the whole of it took a
    second for multilingual-e5-small's 250,000 words. Any other text is parsed whole."""
    decoder = json.JSONDecoder()
    kept, position, seen = ["{"], 1, set()
    try:
        while seen != set(CALL_STATE):
            key, colon = decoder.raw_decode(text, position)
            if key not in (*CALL_STATE, "version") or text[colon] != ":":
                raise ValueError(f"unexpected key {key!r}")
            _, end = decoder.raw_decode(text, colon + 1)
            if key in CALL_STATE:
                seen.add(key)
            else:
                kept.append(text[position : end + 1])
            position = end + 1  # past the comma
    except (ValueError, IndexError):
        saved = json.loads(text)
        for key in CALL_STATE:
            saved.pop(key, None)
        return json.dumps(saved, sort_keys=True)
    return "".join(kept) + text[position:]
