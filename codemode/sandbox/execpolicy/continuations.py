"""Line continuations (backslash-newline), removed where bash removes them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node


def _text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


# A line continuation is a backslash-newline whose backslash is not itself escaped.
_CONTINUATION = re.compile(rb"(?<!\\)(?:\\\\)*\\\n")
# Where bash keeps a backslash-newline as it is.
_VERBATIM = frozenset({"raw_string", "ansi_c_string", "comment"})


def join_continuations(src: bytes, root: Node) -> bytes:
    """Remove line continuations the way bash does before it splits words.

    tree-sitter-bash treats ``r\\<newline>m`` as two words, bash as ``rm``; matching on
    tree-sitter's view would let ``r\\<newline>m -rf /`` through.
    """
    if b"\\\n" not in src:
        return src
    keep: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in _VERBATIM or (n.type == "heredoc_body" and quoted_heredoc(n)):
            keep.append((n.start_byte, n.end_byte))
            continue
        stack.extend(n.children)
    cuts = []
    for m in _CONTINUATION.finditer(src):
        at = m.end() - 2
        if not any(a <= at < b for a, b in keep):
            cuts.append(at)
    if not cuts:
        return src
    out = bytearray()
    pos = 0
    for at in cuts:
        out += src[pos:at]
        pos = at + 2
    out += src[pos:]
    return bytes(out)


def quoted_heredoc(body: Node) -> bool:
    start = body.prev_sibling
    while start is not None and start.type != "heredoc_start":
        start = start.prev_sibling
    return start is not None and any(q in _text_of(start) for q in "'\"\\")
