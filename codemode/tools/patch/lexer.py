"""Lines to tokens for the LALR parser: one per marker line, one per run of change lines.

This is where slips in low-cost model output are forgiven, because only here is each
line seen with its neighbours:

- markers padded with whitespace (`` *** Update File: a.py ``) and in any letter case;
- prose and a missing ``*** Begin Patch`` before the first file header, a missing
  ``*** End Patch`` at the end, and two patches glued together (``*** End Patch`` directly
  followed by ``*** Begin Patch``);
- in an updated file, a blank line is an empty context line (between chunks it is
  skipped), and a line without its leading space is a context line;
- in an added file, blank lines between ``+`` lines are empty lines of the file;
- ``@@ -12,3 +12,4 @@`` unified-diff hunk headers, and ``@@ text @@`` closed like one;
- paths wrapped in backticks or quotes.

Inside a chunk, a line made of exactly one space and then marker text (`` *** End of
File``) is a context line whose content is that text, so files about patches can be
patched too. The last ``*** End Patch`` line always ends the patch.

Each token's value is the line in canonical form (what ``apply_patch.lark`` accepts),
its ``line`` the 1-based line number in the text the model sent, and its ``start_pos``
its index in the token list (used to word parse errors). Consecutive lines of one
change type (``+``, ``-`` or `` ``) make one token whose value is those lines joined by
newlines: the grammar reads them the same way (``change+``), and the parser takes one
step per run instead of one per line.
"""

from __future__ import annotations

import re
from typing import Literal

from lark import Token

from codemode.tools.patch.errors import PatchError

State = Literal["start", "top", "add", "update", "chunk", "after_eof"]

_MARKER = re.compile(
    r"\*\*\*\s*(begin patch|end patch|end of file|add file|delete file|update file|move to)\b"
    r"\s*:?\s*(.*)",
    re.IGNORECASE,
)
_HEADERS = {
    "add file": ("ADD_FILE", "*** Add File: "),
    "delete file": ("DELETE_FILE", "*** Delete File: "),
    "update file": ("UPDATE_FILE", "*** Update File: "),
    "move to": ("MOVE_TO", "*** Move to: "),
}
_CHANGE_TYPES = {"+": "ADDED_LINE", "-": "REMOVED_LINE", " ": "CONTEXT_LINE"}
_RUN_TYPES = frozenset(_CHANGE_TYPES.values())
_NO_NEWLINE = "\\ No newline at end of file"


def lex(lines: list[str], first_line: int = 1) -> list[Token]:
    """Tokens for the patch ``lines`` (already unwrapped, without line endings).

    Raises PatchError for a line that fits nowhere (an unknown ``***`` header, text
    outside any file section, an added-file line without ``+``).
    """
    return _Lexer(lines, first_line).run()


def canonical_text(tokens: list[Token]) -> str:
    """The patch in canonical form, one line per token."""
    return "".join(f"{tok}\n" for tok in tokens)


class _Lexer:
    def __init__(self, lines: list[str], first_line: int) -> None:
        self.lines = lines
        self.first_line = first_line
        self.tokens: list[Token] = []
        self.state: State = "start"
        self.blank_run: list[int] = []  # blank lines seen inside an added file
        # Consecutive lines of one change type, not yet made a token.
        self.run_kind: str | None = None
        self.run_values: list[str] = []
        self.run_start = 0

    def emit(self, kind: str, value: str, index: int) -> None:
        if kind in _RUN_TYPES:
            if kind != self.run_kind:
                self.flush()
                self.run_kind, self.run_start = kind, index
            self.run_values.append(value)
            return
        self.flush()
        self.tokens.append(
            Token(kind, value, start_pos=len(self.tokens), line=self.first_line + index)
        )

    def flush(self) -> None:
        """Make the pending run of like lines one token (its value holds the lines
        joined by newlines), so the parser handles a 5,000-line added file in one step."""
        if self.run_kind is None:
            return
        value = "\n".join(self.run_values)
        line = self.first_line + self.run_start
        self.tokens.append(Token(self.run_kind, value, start_pos=len(self.tokens), line=line))
        self.run_kind, self.run_values = None, []

    def run(self) -> list[Token]:
        lines = self.lines
        end = _last_end_patch(lines)
        stop = end if end is not None else len(lines)
        skip_begin = False
        for i in range(stop):
            raw = lines[i]
            kind = self.plain_change(raw)
            if kind is not None:  # the common case, kept cheap: a +, - or context line
                if kind == self.run_kind:
                    self.run_values.append(raw)
                else:
                    self.emit(kind, raw, i)
                continue
            stripped = raw.strip()
            if skip_begin and stripped:
                skip_begin = False
                if stripped.lower() == "*** begin patch":
                    continue
            marker = self.marker(raw, stripped)
            if marker is not None and marker[0] == "end patch" and self._begin_follows(i, stop):
                skip_begin = True  # two patches glued together: read them as one
                continue
            self.line(i, raw, stripped, marker)
        if self.state == "start":
            raise PatchError(
                "The text is not a patch: it has no '*** Begin Patch' line and no "
                "'*** Add File:', '*** Update File:' or '*** Delete File:' header.",
                show_format=True,
            )
        self.emit("END_PATCH", "*** End Patch", end if end is not None else len(lines))
        self.flush()
        return self.tokens

    def plain_change(self, raw: str) -> str | None:
        """The token type of a line that can only be a change line here, else None."""
        first = raw[:1]
        if self.state == "chunk":
            if first in ("+", "-"):
                return _CHANGE_TYPES[first]
            if first == " " and (
                raw[1:2] not in (" ", "\t") or not raw.lstrip().startswith(("***", "@@"))
            ):
                return "CONTEXT_LINE"
        elif self.state == "add" and first == "+" and not self.blank_run:
            return "ADDED_LINE"
        return None

    def _begin_follows(self, i: int, stop: int) -> bool:
        for raw in self.lines[i + 1 : stop]:
            if raw.strip():
                return raw.strip().lower() == "*** begin patch"
        return False

    def marker(self, raw: str, stripped: str) -> tuple[str, str] | None:
        """(keyword, argument) when the line is a ``***`` marker in this state."""
        if not stripped.startswith("***"):
            return None
        if _one_space(raw, self.state == "chunk"):
            return None  # one space, then text: a context line that reads like a marker
        m = _MARKER.fullmatch(stripped)
        if m is None:
            return ("unknown", stripped)
        return m.group(1).lower(), (m.group(2) or "").strip()

    def line(self, i: int, raw: str, stripped: str, marker: tuple[str, str] | None) -> None:
        state = self.state
        if marker is not None:
            self.marker_line(i, raw, marker)
        elif state == "top":
            if stripped:
                self.stray(i, raw)
        elif state == "start":
            pass  # prose before the first file header
        elif state == "add":
            if raw.startswith("+"):
                for blank in self.blank_run:
                    self.emit("ADDED_LINE", "+", blank)
                self.blank_run = []
                self.emit("ADDED_LINE", raw, i)
            elif not stripped:
                self.blank_run.append(i)
            else:
                path = self.current_path()
                raise PatchError(
                    f"Line {self.first_line + i} of the patch: {raw!r} is inside "
                    f"'*** Add File: {path}', where every line of the new file must "
                    "start with '+'.",
                    show_format=True,
                )
        else:
            self.change_line(i, raw, stripped)

    def change_line(self, i: int, raw: str, stripped: str) -> None:
        in_chunk = self.state == "chunk"
        if not stripped and not in_chunk:
            return  # blank lines before the first chunk or after "*** End of File"
        if stripped.startswith("@@") and (raw.startswith("@@") or not _one_space(raw, in_chunk)):
            rest = stripped[2:]
            anchor = rest[1:] if rest.startswith(" ") else rest
            if anchor.endswith(" @@") and not anchor.startswith("-"):
                anchor = anchor[:-3].rstrip()  # "@@ def f(): @@", closed like a diff header
            self.emit("CHUNK_HEADER", f"@@ {anchor}" if anchor.strip() else "@@", i)
            self.state = "chunk"
        elif not raw:
            self.emit("CONTEXT_LINE", " ", i)  # an empty line of the file
        elif raw[0] in _CHANGE_TYPES:
            self.emit(_CHANGE_TYPES[raw[0]], raw, i)
            self.state = "chunk"
        elif raw == _NO_NEWLINE:
            pass  # from a unified diff; updated files always end with a newline
        else:
            # A context line that lost its leading space.
            self.emit("CONTEXT_LINE", " " + raw, i)
            self.state = "chunk"

    def marker_line(self, i: int, raw: str, marker: tuple[str, str]) -> None:
        keyword, arg = marker
        if keyword == "begin patch":
            if self.state == "start":
                self.emit("BEGIN_PATCH", "*** Begin Patch", i)
                self.state = "top"
                return
            raise PatchError(
                f"Line {self.first_line + i} of the patch: a second '*** Begin Patch' "
                "inside the patch."
            )
        if self.state == "start":
            if keyword not in ("add file", "update file", "delete file"):
                return  # prose before the first file header
            self.emit("BEGIN_PATCH", "*** Begin Patch", i)
        if keyword == "unknown":
            self.stray(i, raw)
        if keyword == "end patch":
            self.emit("END_PATCH", "*** End Patch", i)
            self.state = "top"
        elif keyword == "end of file":
            self.emit("END_OF_FILE", "*** End of File", i)
            self.state = "after_eof"
        else:
            kind, prefix = _HEADERS[keyword]
            path = _unquote(arg)
            if not path:
                raise PatchError(
                    f"Line {self.first_line + i} of the patch: {raw.strip()!r} names no path.",
                    show_format=True,
                )
            self.emit(kind, prefix + path, i)
            self.blank_run = []
            self.state = {"add file": "add", "delete file": "top"}.get(keyword, "update")

    def stray(self, i: int, raw: str) -> None:
        raise PatchError(
            f"Line {self.first_line + i} of the patch: {raw.strip()!r} is not a valid file "
            "header. Each file section starts with '*** Add File: PATH', "
            "'*** Update File: PATH' or '*** Delete File: PATH', and the patch ends with "
            "'*** End Patch'.",
            show_format=True,
        )

    def current_path(self) -> str:
        for tok in reversed(self.tokens):
            if tok.type in ("ADD_FILE", "UPDATE_FILE", "DELETE_FILE"):
                return tok.split(": ", 1)[1]
        return "?"


def _one_space(raw: str, in_chunk: bool) -> bool:
    """Inside a chunk, one space and then text is a context line, whatever the text."""
    return in_chunk and raw[:1] == " " and raw[1:2] not in (" ", "\t")


def _last_end_patch(lines: list[str]) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        stripped = lines[i].strip()
        if stripped:
            return i if stripped.lower() == "*** end patch" else None
    return None


def _unquote(path: str) -> str:
    if len(path) >= 2 and path[0] == path[-1] and path[0] in "`'\"":
        return path[1:-1].strip()
    return path
