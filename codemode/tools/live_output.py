"""Output of a running command, passed on as it arrives (for a live display).

The ``shell`` tool collects a command's output and returns it when the command ends; a
person watching a long build wants to see it before then. Whoever runs a tool call (the
session's runner) may hand the call a ``ToolContext`` whose ``live_output`` is a feed
from ``text_feed``; the shell tool passes every chunk it reads to it.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Callable

Feed = Callable[[bytes], None]


def text_feed(sink: Callable[[str], None]) -> Feed:
    """A feed handing ``sink`` the text of the bytes it gets (UTF-8 split across chunks
    decoded whole). A failing sink never fails the command."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(chunk: bytes) -> None:
        with contextlib.suppress(Exception):
            text = decoder.decode(chunk)
            if text:
                sink(text)

    return feed
