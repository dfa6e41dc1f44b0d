"""File contents as text, without losing a byte.

A file that starts with a UTF-32 or UTF-16 byte order mark and decodes cleanly after
it is text in that encoding (the mark is not part of the text, and is written back
in front of it). Otherwise a file that is valid UTF-8 is text in UTF-8 (a UTF-8 mark,
if any, stays in the text as U+FEFF). Any other file is read as Latin-1, where each
byte is one character (U+0000-U+00FF), so every byte survives a read, an edit and a
write: the tools report which encoding they used, and write a file back in the
encoding it had. Nothing is ever replaced by U+FFFD.
"""

from __future__ import annotations

from typing import Literal

from codemode.tool_terms.errors import ToolError

Encoding = Literal["utf-8", "latin-1", "utf-16le", "utf-16be", "utf-32le", "utf-32be"]
ENCODINGS: tuple[Encoding, ...] = (
    "utf-8",
    "latin-1",
    "utf-16le",
    "utf-16be",
    "utf-32le",
    "utf-32be",
)
REPLACEMENT = "\ufffd"
BOM_CHAR = "\ufeff"
# The encodings a file is only ever taken to be by its byte order mark, which they are
# written with. UTF-32 first: its little-endian mark begins with UTF-16's.
MARKED: dict[Encoding, bytes] = {
    "utf-32le": b"\xff\xfe\x00\x00",
    "utf-32be": b"\x00\x00\xfe\xff",
    "utf-16le": b"\xff\xfe",
    "utf-16be": b"\xfe\xff",
}
# How many characters from the start decide that text with NULs is a binary file.
BINARY_SNIFF_CHARS = 8192


def decode(data: bytes) -> tuple[str, Encoding]:
    """``data`` as text, and the encoding that gave it."""
    for encoding, mark in MARKED.items():
        if data.startswith(mark):
            try:
                return data[len(mark) :].decode(encoding), encoding
            except UnicodeDecodeError:
                continue  # a mark by chance (or a damaged file): not that encoding
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def is_binary(text: str) -> bool:
    """Whether ``text`` (as ``decode`` gave it) is a binary file's: a NUL this early is
    the heuristic git and grep use (on bytes; on the text it also fits UTF-16)."""
    return "\0" in text[:BINARY_SNIFF_CHARS]


def encode(text: str, encoding: Encoding, shown: str) -> bytes:
    """``text`` in ``encoding``; a ToolError naming the first character it cannot hold.
    A UTF-16 or UTF-32 file gets its byte order mark (once: a U+FEFF the text starts
    with is taken to be that mark)."""
    mark = MARKED.get(encoding, b"")
    if mark and text.startswith(BOM_CHAR):
        text = text[1:]
    try:
        return mark + text.encode(encoding)
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
            f"as {encoding.upper()} (a lone surrogate)"
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


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines, each keeping its ending.

    Only ``\\n`` ends a line (unlike ``str.splitlines``, which also breaks on form feeds
    and other separators), so line numbers agree with editors, git and grep, and a
    ``\\r\\n`` ending comes back intact.
    """
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
