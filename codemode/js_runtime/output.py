"""Console output with a cap that keeps the head and the tail.

The start of a program's output says what it set out to do and the end says how it
finished; the middle of a runaway loop is what a model's context can spare.
"""

from __future__ import annotations

import json
from collections import deque

from codemode.js_runtime.models import LogEntry
from codemode.tool_terms.elide import elide_middle
from codemode.tool_terms.elide import marker as elision_marker


class CappedOutput:
    """Collects log entries; beyond ``cap`` characters the middle is elided."""

    def __init__(self, cap: int) -> None:
        self._head_budget = cap - cap // 2
        self._tail_budget = cap // 2
        self._head: list[LogEntry] = []
        self._head_chars = 0
        self._tail: deque[LogEntry] = deque()
        self._tail_chars = 0
        self.elided = 0

    def add(self, level: str, text: str) -> str | None:
        """Record one entry; returns the part that belongs to the head (to stream now)."""
        room = self._head_budget - self._head_chars
        if room > 0 and not self._tail:
            shown = text if len(text) <= room else text[:room]
            self._head.append(LogEntry(level=level, text=shown))  # type: ignore[arg-type]
            self._head_chars += len(shown)
            rest = text[len(shown) :]
            if rest:
                self._push_tail(level, rest)
            return shown
        self._push_tail(level, text)
        return None

    def _push_tail(self, level: str, text: str) -> None:
        self._tail.append(LogEntry(level=level, text=text))  # type: ignore[arg-type]
        self._tail_chars += len(text)
        while self._tail_chars > self._tail_budget:
            first = self._tail[0]
            excess = self._tail_chars - self._tail_budget
            if len(first.text) <= excess:
                self._tail.popleft()
                self._tail_chars -= len(first.text)
                self.elided += len(first.text)
            else:
                self._tail[0] = LogEntry(level=first.level, text=first.text[excess:])
                self._tail_chars -= excess
                self.elided += excess

    @property
    def truncated(self) -> bool:
        return self.elided > 0

    def entries(self) -> list[LogEntry]:
        marker = [LogEntry(level="elided", text=self.marker())] if self.elided else []
        return [*self._head, *marker, *self._tail]

    def marker(self) -> str:
        return elision_marker(self.elided, "output")

    def text(self) -> str:
        return "\n".join(e.text for e in self.entries())


def cap_value(value: object, cap: int) -> tuple[object, bool]:
    """A program's return value, kept whole up to ``cap`` characters of JSON; beyond
    that it becomes text: the head and the tail of its JSON, the middle marked."""
    if value is None or isinstance(value, bool | int | float):
        return value, False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    cut, elided = elide_middle(text, cap, "the return value")
    return (cut, True) if elided else (value, False)
