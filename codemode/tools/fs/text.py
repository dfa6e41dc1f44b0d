"""File contents as text, without losing a byte.

A file that is valid UTF-8 is text in UTF-8. Any other file is read as Latin-1, where
each byte is one character (U+0000-U+00FF), so every byte survives a read, an edit and
a write: the tools report which encoding they used, and write a file back in the
encoding it had. Nothing is ever replaced by U+FFFD.
"""

from __future__ import annotations

from typing import Literal

from codemode.tools.context import ToolError

Encoding = Literal["utf-8", "latin-1"]
ENCODINGS: tuple[Encoding, ...] = ("utf-8", "latin-1")
REPLACEMENT = "\ufffd"


def decode(data: bytes) -> tuple[str, Encoding]:
    """``data`` as text, and the encoding that gave it."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def encode(text: str, encoding: Encoding, shown: str) -> bytes:
    """``text`` in ``encoding``; a ToolError naming the first character it cannot hold."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        if encoding == "latin-1":
            raise ToolError(
                f"{shown} is Latin-1 text (it is not valid UTF-8), and the new content has "
                f"{bad!r} (U+{ord(bad):04X}), which Latin-1 cannot hold; keep to characters "
                'up to U+00FF, or pass encoding: "utf-8" to write the file as UTF-8'
            ) from None
        raise ToolError(
            f"{shown}: the content has {bad!r} (U+{ord(bad):04X}), which cannot be written "
            "as UTF-8 (a lone surrogate)"
        ) from None


def check_no_new_replacement(new: str, old: str | None, shown: str) -> None:
    """Refuse to put U+FFFD into an existing file that had none: it is the mark of
    text decoded with bytes lost, and writing it back would lose them for good."""
    if old is not None and REPLACEMENT in new and REPLACEMENT not in old:
        raise ToolError(
            f"refusing to write {shown}: the new content has U+FFFD (the replacement "
            "character), which the file did not have; that usually means bytes were lost "
            "when the text was decoded (as the shell tool's output does). Read the file "
            "with read_file, which keeps every byte, and write that text"
        )
