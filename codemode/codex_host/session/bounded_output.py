"""The output one report of a cell keeps when the host truncates (output_truncation
SERVER), as Codex 0.171's host keeps it (framed capability ``bounded-output-v1``).

Its text is kept up to 1 MiB of UTF-8: the first 512 KiB as it came, and the last
512 KiB; what falls between is said by one marker item in its place,
``[Code Mode session output limit reached: omitted N text bytes; discarded K text
segments, 0 images, 0 audio items]``. Images keep their places and cost nothing, so
text dropped on both sides of a kept image gets a marker on each side. A text item cut
at the head's end goes on, its rest the tail's first segment; the tail drops its
oldest segments whole (each one counted) and cuts the front of the one that crosses
the bound (its bytes counted, not the segment). Those are the rules Codex's host was
seen to follow (its answers to the same programs: tests/test_codex_host_framed_bounds.py);
the truncation that follows keeps the marker in its place (``truncation.py``).

It is kept as it comes, so the memory one report holds is the bound whatever a program
writes; ``held`` says what that is now, in the host's memory (``limits.output_cost``), for
the connection's account of its cells' output.
"""

from __future__ import annotations

from collections import deque

from codemode.codex_host.session.limits import OUTPUT_EACH, output_cost
from codemode.codex_host.session.model import ContentItem, ImageItem, LimitMarker, TextItem

HALF = 512 * 1024  # bytes of UTF-8 kept at each end
# Text items kept at each end: a flood of empty or tiny items costs the host far more than
# their bytes (a kept item is a Python object), so past this many the head is full and the
# tail drops its oldest whole, counted as any dropped segment is.
HALF_ITEMS = 32_768


class _Omitted:
    """What was dropped at one place between kept items."""

    __slots__ = ("bytes", "segments")

    def __init__(self) -> None:
        self.bytes = 0
        self.segments = 0

    def item(self) -> LimitMarker:
        return LimitMarker(
            f"[Code Mode session output limit reached: omitted {self.bytes} text bytes; "
            f"discarded {self.segments} text segments, 0 images, 0 audio items]"
        )


Entry = ContentItem | _Omitted


def _cost(entry: Entry) -> int:
    if isinstance(entry, TextItem):
        return output_cost(entry.text)
    if isinstance(entry, ImageItem):
        return output_cost(entry.image_url)
    return OUTPUT_EACH


def _head_bytes(data: bytes, room: int) -> int:
    """The most bytes of ``data``'s start, at most ``room``, ending on a character."""
    cut = min(room, len(data))
    while 0 < cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return cut


def _front_cut(data: bytes, excess: int) -> int:
    """The fewest bytes of ``data``'s start, at least ``excess``, ending on a character."""
    cut = excess
    while cut < len(data) and (data[cut] & 0xC0) == 0x80:
        cut += 1
    return cut


class BoundedItems:
    """One report's items, bounded as they come."""

    def __init__(self) -> None:
        self.head: list[ContentItem] = []
        self.head_bytes = 0
        self.tail: deque[Entry] = deque()
        self.tail_bytes = 0
        self.tail_texts = 0  # text items in the tail
        self.held = 0  # bytes of the host's memory its entries cost (``_cost``)
        # Every tail entry before this index is a marker or an image: the oldest text is
        # at it or after it (kept so that a flood of tiny items costs no rescans).
        self._first = 0

    def add(self, item: ContentItem) -> None:
        if not isinstance(item, TextItem):
            (self.head if not self.tail and self.head_bytes < HALF else self.tail).append(item)
            self.held += _cost(item)
            return
        data = item.text.encode()
        room = HALF - self.head_bytes
        if room > 0 and not self.tail and len(self.head) < HALF_ITEMS:
            if len(data) <= room:
                self.head.append(item)
                self.head_bytes += len(data)
                self.held += _cost(item)
                return
            cut = _head_bytes(data, room)
            self.head.append(TextItem(data[:cut].decode()))
            self.held += _cost(self.head[-1])
            self.head_bytes = HALF  # full, even when a character did not fit
            data = data[cut:]
        self.tail.append(TextItem(data.decode()))
        self.held += _cost(self.tail[-1])
        self.tail_bytes += len(data)
        self.tail_texts += 1
        while self.tail_bytes > HALF:
            self._drop_oldest(self.tail_bytes - HALF)
        while self.tail_texts > HALF_ITEMS:
            self._drop_oldest(0, whole=True)

    def _drop_oldest(self, excess: int, whole: bool = False) -> None:
        """Drop ``excess`` bytes (or more, to a character) from the oldest text; with
        ``whole``, that text whatever its size."""
        tail = self.tail
        index = self._first
        while not isinstance(tail[index], TextItem):
            index += 1
        text = tail[index]
        assert isinstance(text, TextItem)
        before = tail[index - 1] if index > 0 else None
        if isinstance(before, _Omitted):
            omitted = before
        else:  # a marker in its place, just before it
            omitted = _Omitted()
            tail.insert(index, omitted)
            self.held += OUTPUT_EACH
            index += 1
        self._first = index
        data = text.text.encode()
        self.held -= _cost(text)
        if whole or len(data) <= excess:  # the whole segment goes
            del tail[index]
            omitted.bytes += len(data)
            omitted.segments += 1
            self.tail_bytes -= len(data)
            self.tail_texts -= 1
        else:  # its front goes
            cut = _front_cut(data, excess)
            tail[index] = TextItem(data[cut:].decode())
            self.held += _cost(tail[index])
            omitted.bytes += cut
            self.tail_bytes -= cut

    def take(self) -> list[ContentItem]:
        items = list(self.head)
        for entry in self.tail:
            items.append(entry.item() if isinstance(entry, _Omitted) else entry)
        self.head, self.tail, self.head_bytes, self.tail_bytes = [], deque(), 0, 0
        self.tail_texts = self._first = self.held = 0
        return items
