"""Output truncation by the host: a report cut to the execute's ``max_output_tokens``
(10,000 when it names none), as Codex's own host cuts it when a session is opened with
``output_truncation`` SERVER (gRPC) or ``"outputTruncation": "server"`` (framed).

The rules are those Codex 0.171's host was seen to follow (its captured outcome in
tests/data/codex-0.171/, and its answers to direct requests; docs/codex-host.md):

- Tokens are estimated at 4 bytes of UTF-8 each, rounded up. A cut text keeps half the
  byte budget from its head and half from its tail, on character boundaries, with
  ``…K tokens truncated…`` (K: the removed bytes' estimate) between.
- A report of text items only is left alone while their text joined with newlines fits;
  else it becomes one item, ``Warning: truncated output (original token count: N)``,
  ``Total output lines: L``, a blank line, then the joined text cut.
- A report whose text was bounded (``bounded_output.py``: one marker item where the
  middle was dropped) is cut the same way, its text joined without the marker; the
  marker then stays between the cut's head (with its header and ``…K tokens
  truncated…``) and its tail, which come as two items.
- A report with an image spends the budget item by item: a text item that fits is kept
  whole, the first that does not is cut to what is left, later ones are left out (said
  by ``[omitted N text items ...]`` at the end); images are kept, and cost nothing.
"""

from __future__ import annotations

from codemode.codex_host.session.model import ContentItem, LimitMarker, TextItem

BYTES_PER_TOKEN = 4
# Codex's host's budget for an execute that names no max_output_tokens.
DEFAULT_MAX_TOKENS = 10_000


def tokens(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _lines(text: str) -> int:
    # Rust's str::lines, which Codex counts with: a final newline starts no line.
    return text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _cut_apart(data: bytes, max_tokens: int) -> tuple[str, str]:
    """Head and tail of ``data`` within ``max_tokens``: the head ends with the marker."""
    budget = max_tokens * BYTES_PER_TOKEN
    half = budget // 2
    head = data[:half].decode("utf-8", "ignore")  # a split character is left out
    tail_bytes = budget - half
    tail = data[len(data) - tail_bytes :].decode("utf-8", "ignore") if tail_bytes else ""
    removed = len(data) - len(_utf8(head)) - len(_utf8(tail))
    return f"{head}…{tokens(removed)} tokens truncated…", tail


def _cut(data: bytes, max_tokens: int) -> str:
    """Head and tail of ``data`` within ``max_tokens``, the marker between."""
    return "".join(_cut_apart(data, max_tokens))


def _cut_joined(texts: list[str], max_tokens: int) -> tuple[str, str] | None:
    """The texts joined and cut, as a head (with the header) and a tail; None when
    they fit."""
    whole = "\n".join(texts)
    data = _utf8(whole)
    if len(data) <= max_tokens * BYTES_PER_TOKEN:
        return None
    head, tail = _cut_apart(data, max_tokens)
    return (
        f"Warning: truncated output (original token count: {tokens(len(data))})\n"
        f"Total output lines: {_lines(whole)}\n\n{head}",
        tail,
    )


def _cut_each(items: list[ContentItem], max_tokens: int) -> list[ContentItem]:
    left, omitted = max_tokens, 0
    out: list[ContentItem] = []
    for item in items:
        if not isinstance(item, TextItem):
            out.append(item)
            continue
        if left == 0:
            omitted += 1
            continue
        data = _utf8(item.text)
        cost = tokens(len(data))
        if cost <= left:
            out.append(item)
            left -= cost
        else:
            out.append(TextItem(_cut(data, left)))
            left = 0
    if omitted:
        out.append(TextItem(f"[omitted {omitted} text items ...]"))
    return out


def cut_items(items: list[ContentItem], max_tokens: int) -> list[ContentItem]:
    """A report's items as a host that truncates sends them (the rules above)."""
    if all(isinstance(item, TextItem) for item in items):
        markers = [item for item in items if isinstance(item, LimitMarker)]
        if len(markers) > 1:  # text dropped on both sides of an image that is gone now
            return _cut_each(items, max_tokens)
        texts = [
            item.text
            for item in items
            if isinstance(item, TextItem) and not isinstance(item, LimitMarker)
        ]
        cut = _cut_joined(texts, max_tokens)
        if cut is None:
            return items
        head, tail = cut
        if not markers:
            return [TextItem(head + tail)]
        return [TextItem(head), markers[0], TextItem(tail)]
    return _cut_each(items, max_tokens)
