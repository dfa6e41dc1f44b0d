"""Text from outside shown on a terminal without being obeyed by it.

Everything codemode shows comes from outside: the model's text, command output, file
names and contents, MCP replies. Any of them may hold escape sequences a terminal
obeys: clear the screen, move the cursor to overwrite what was printed (hiding part of
a command), set the window title, write the clipboard (OSC 52). ``visible`` turns every
C0 control but newline and tab, DEL and every C1 control into caret or ``\\x..``
notation; a carriage return (as in CRLF output) is dropped, since shown as it is it
lets a line overwrite what came before it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

_KEEP = {0x09: "\t", 0x0A: "\n", 0x0D: ""}


def _shown(code: int) -> str:
    if code in _KEEP:
        return _KEEP[code]
    if code < 0x20:
        return "^" + chr(code + 0x40)  # ESC -> ^[, NUL -> ^@
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}"  # C1 (0x80-0x9f): CSI, OSC... in one byte on some terminals


_TABLE = {c: _shown(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


def visible(text: str) -> str:
    """``text`` with every control character shown, not obeyed (newline and tab kept)."""
    return text.translate(_TABLE)


def echo(
    text: object = "",
    *,
    err: bool = False,
    nl: bool = True,
    file: TextIO | None = None,
    raw_to_pipe: bool = False,
) -> None:
    """Print ``text`` for a CLI command, every control character made ``visible``: the
    one way the CLI shows what did not come from codemode (names, descriptions, file
    paths and contents, error messages quoting them, MCP replies, session titles).
    ``tests/test_cli_output.py`` checks that no CLI module prints any other way.

    ``file``: the stream (default stdout, or stderr with ``err``). ``raw_to_pipe``: a
    command's product meant for another program (a script's own stdout) goes to a pipe
    or file unchanged, and is made visible on a terminal only."""
    import sys

    stream = file if file is not None else sys.stderr if err else sys.stdout
    shown = str(text)
    if not (raw_to_pipe and not _is_tty(stream)):
        shown = visible(shown)
    stream.write(shown + ("\n" if nl else ""))
    stream.flush()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# JSON output: control characters as JSON escapes, so the value read back is unchanged.
# (``json.dumps`` escapes C0 itself; DEL and C1 only with ensure_ascii.)
_JSON_TABLE = {c: f"\\u{c:04x}" for c in (0x7F, *range(0x80, 0xA0))}


def json_text(value: Any, **dumps: Any) -> str:
    """``json.dumps(value, **dumps)`` with no control character left raw: print it with
    ``echo`` (where it comes out unchanged)."""
    import json

    return json.dumps(value, **dumps).translate(_JSON_TABLE)


if TYPE_CHECKING:
    from rich.console import Console


def safe_console(**options: Any) -> Console:
    """A ``rich.console.Console`` (``options`` as for it) that writes no control
    sequence from what it shows: rich keeps ESC in the text it prints (``Text`` drops
    only BEL, BS, VT, FF and CR; Markdown and Syntax keep all of it), so the text of each
    segment it writes is made ``visible``. rich's own sequences (styles, the live
    region's cursor moves, links) come from styles and control segments and are kept."""
    return _safe_console_class()(**options)


@functools.cache
def _safe_console_class() -> type[Console]:
    from rich.console import Console  # lazy: rich, only where a console is drawn
    from rich.segment import Segment

    def cleaned(buffer: Iterable[Segment]) -> Iterator[Segment]:
        for segment in buffer:
            if segment.control is None and segment.text:
                yield Segment(visible(segment.text), segment.style)
            else:
                yield segment  # rich's own cursor moves and screen control

    class SafeConsole(Console):
        def _render_buffer(self, buffer: Iterable[Segment]) -> str:
            return super()._render_buffer(cleaned(buffer))

    return SafeConsole
