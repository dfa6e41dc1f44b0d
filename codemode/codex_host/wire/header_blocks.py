"""HPACK decoding that remembers the header blocks a client sends again and again.

A gRPC client sends the same header block for every call of a method: Codex's
``CompleteToolCall`` carries, call after call, the same bytes (the static and dynamic
table entries it indexed, and the path as a literal that is not added to the table).
hpack decodes each one afresh in Python, the Huffman-coded path bit by bit: about a
third of what h2 spends on such a request, on the path from a tool's result to the
program that waits for it (docs/codex-host.md, "What waits on what").

``RepeatedBlocks`` is hpack's ``Decoder`` with a small memory: a block that left the
dynamic table as it found it is kept with what it decoded to, keyed by its bytes *and*
everything its decoding read (the dynamic table's entries, the table size and its
allowed maximum, the header-list limit). Decoding is a pure function of that key, so a
block met again under the same key decodes to the same headers, the same checks
passing; any change to the table or a limit is a different key. A block that adds to
the table or resizes it is never kept, so it is decoded (and changes the table) every
time, as before. What is kept is bounded: ``KEPT`` blocks of at most ``BLOCK_BYTES``
bytes and ``HEADERS`` headers each, the oldest dropped first.
"""

from __future__ import annotations

from collections.abc import Iterable

from hpack import Decoder, HeaderTuple

KEPT = 16
BLOCK_BYTES = 512
HEADERS = 32


class RepeatedBlocks(Decoder):
    """hpack's ``Decoder``, answering a block decoded before under the same table and
    limits from memory."""

    def __init__(self, max_header_list_size: int) -> None:
        super().__init__(max_header_list_size=max_header_list_size)
        self._kept: dict[tuple[object, ...], tuple[HeaderTuple, ...]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Iterable[HeaderTuple]:
        if len(data) > BLOCK_BYTES:  # never kept: not worth its key
            return super().decode(data, raw)
        table = self.header_table
        entries = tuple(table.dynamic_entries)
        key = (
            bytes(data), entries, table.maxsize, self.max_allowed_table_size,
            self.max_header_list_size, raw,
        )  # fmt: skip
        known = self._kept.get(key)
        if known is not None:
            return list(known)
        headers = list(super().decode(data, raw))
        unchanged = table.maxsize == key[2] and tuple(table.dynamic_entries) == entries
        if unchanged and len(headers) <= HEADERS:
            if len(self._kept) >= KEPT:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = tuple(headers)
        return headers
