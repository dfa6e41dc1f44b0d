"""Output truncation by the host: a report's text cut to the execute's
``max_output_tokens``, in the format Codex's own host uses when a session is opened with
``output_truncation`` SERVER (gRPC) or ``"outputTruncation": "server"`` (framed).

Codex's format, from its host's captured outcome (tests/data/codex-0.171/): tokens are
estimated at 4 bytes of UTF-8 each (rounded up); text within ``4 * max_output_tokens``
bytes is left alone; longer text becomes::

    Warning: truncated output (original token count: N)
    Total output lines: L

    <head>…K tokens truncated…<tail>

with head and tail half the byte budget each, cut on character boundaries, and K the
removed bytes' estimate. Codex's host joined a report's text items with newlines into
that one item. What it does with images was not captured; ours is the rule in
docs/codex-host.md: images are not counted, and keep their places.
"""

from __future__ import annotations

from codemode.codex_host.model import ContentItem, TextItem

BYTES_PER_TOKEN = 4


def tokens(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)


def _lines(text: str) -> int:
    # Rust's str::lines, which Codex counts with: a final newline starts no line.
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _head(data: bytes, size: int) -> str:
    return data[:size].decode("utf-8", "ignore")  # a split character is left out


def _tail(data: bytes, size: int) -> str:
    return data[len(data) - size :].decode("utf-8", "ignore") if size else ""


def cut_text(text: str, max_tokens: int) -> str | None:
    """``text`` cut to ``max_tokens``; None when it fits."""
    data = text.encode("utf-8", "surrogatepass")
    budget = max_tokens * BYTES_PER_TOKEN
    if len(data) <= budget:
        return None
    head = _head(data, budget // 2)
    tail = _tail(data, budget - budget // 2)
    kept = len(head.encode("utf-8", "surrogatepass")) + len(tail.encode("utf-8", "surrogatepass"))
    return (
        f"Warning: truncated output (original token count: {tokens(len(data))})\n"
        f"Total output lines: {_lines(text)}\n\n"
        f"{head}…{tokens(len(data) - kept)} tokens truncated…{tail}"
    )


def cut_items(items: list[ContentItem], max_tokens: int) -> list[ContentItem]:
    """A report's items as the client gets them from a host that truncates: unchanged when
    their text fits, else the text items joined into one cut item, at the first text
    item's place (images kept where they were)."""
    texts = [item.text for item in items if isinstance(item, TextItem)]
    cut = cut_text("\n".join(texts), max_tokens) if texts else None
    if cut is None:
        return items
    out: list[ContentItem] = []
    for item in items:
        if not isinstance(item, TextItem):
            out.append(item)
        elif cut is not None:
            out.append(TextItem(cut))
            cut = None
    return out
