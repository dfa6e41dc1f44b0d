"""Streamed text in the terminal: finished paragraphs printed for good, the one being
written redrawn in a short live region (one taller than the screen cannot be redrawn).
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

_REDRAWS_PER_S = 15
_COLLAPSED_REASONING_LINES = 3


def split_committed(text: str) -> tuple[str, str]:
    """Split streamed markdown at the last paragraph break outside a code fence:
    (finished part, part still being written)."""
    cut = -1
    in_fence = False
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            in_fence = not in_fence
        pos += len(line)
        if not in_fence and stripped == "" and line.endswith("\n") and pos < len(text):
            cut = pos
    if cut <= 0:
        return "", text
    return text[:cut], text[cut:]


class LiveStream:
    """One item streaming into a live region (agent text or reasoning).

    The live region is transient: whatever stays on screen is printed for good with
    ``console.print`` (finished paragraphs as they complete, the rest at the end), so
    nothing is drawn twice.
    """

    def __init__(self, console: Console, kind: str) -> None:
        self.console = console
        self.kind = kind
        self.text = ""
        self.committed = 0  # characters of ``text`` printed for good
        self.live: Live | None = None
        self.summarized = False  # reasoning: its one-line summary is out
        self._last = 0.0

    def _renderable(self, text: str) -> Text | Markdown:
        if self.kind == "reasoning":
            lines = text.rstrip("\n").splitlines()[-_COLLAPSED_REASONING_LINES:]
            return Text("\n".join(lines), style="dim italic")
        return Markdown(text)

    def add(self, delta: str) -> None:
        self.text += delta
        if not self.console.is_terminal or self.summarized:
            return
        if self.kind == "text":
            done, _ = split_committed(self.text[self.committed :])
            if done:
                self.clear()
                self.console.print(Markdown(done))
                self.console.print()  # the blank line markdown puts between blocks
                self.committed += len(done)
        pending = self.text[self.committed :]
        if not pending.strip():
            return
        if self.live is None:
            self.live = Live(
                self._renderable(pending),
                console=self.console,
                auto_refresh=False,
                transient=True,
                vertical_overflow="crop",
            )
            self.live.start(refresh=True)
            self._last = time.monotonic()
            return
        now = time.monotonic()
        if now - self._last >= 1 / _REDRAWS_PER_S:
            self._last = now
            self.live.update(self._renderable(pending), refresh=True)

    def clear(self) -> None:
        """Take the live region off the screen."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def finish(self, final: str | None = None) -> str:
        """End the stream; returns the text not yet printed for good."""
        if final is not None and final.startswith(self.text):
            self.text = final
        self.clear()
        rest = self.text[self.committed :]
        self.committed = len(self.text)
        return rest
