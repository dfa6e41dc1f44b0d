"""The keyboard while a turn runs: Esc interrupts it, typed text waits for the prompt.

No input line is up while a turn runs, so the terminal would be in its cooked mode:
Ctrl-C reaches the session as SIGINT, but Esc sits in the line buffer until Enter.
While a turn runs the terminal is put in cbreak mode (no line buffering, no echo;
signals stay on, so Ctrl-C still works) and its input is read here: a lone Esc calls
``on_escape``; an escape sequence (an arrow key, Alt+key) is not an Esc and is dropped;
other text typed meanwhile is kept, with its backspaces applied (Enter as ``\r``, a
newline as ``\n``), and the next input line starts with it (``codemode.tui.input``
decides what of it is sent).

A question asked in the middle of a turn (an approval) needs the keyboard itself:
``paused()`` hands the terminal back for as long as it is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
from collections.abc import Callable, Iterator

# How long a lone ESC byte waits for the rest of an escape sequence. Terminals send a
# sequence in one write; over SSH its bytes can arrive a little apart.
ESCAPE_DELAY_S = 0.05

_ESC = 0x1B
_BACKSPACES = (0x7F, 0x08)
_TYPEAHEAD_LIMIT = 10_000  # characters kept for the next prompt


class KeyWatcher:
    """Reads the terminal ``fd`` while a turn runs (see the module docstring)."""

    def __init__(self, fd: int, on_escape: Callable[[], None]) -> None:
        self.fd = fd
        self.on_escape = on_escape
        self.typeahead = ""
        self._pending = b""  # bytes of an escape sequence not complete yet
        self._saved: list[int | list[bytes | int]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._running = False

    # --- on and off ------------------------------------------------------------------

    def start(self) -> bool:
        """Take the keyboard; False (and nothing changed) where the terminal refuses."""
        if self._running:
            return True
        try:
            saved = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            # Enter reads as CR, Ctrl-J as LF: a line sent with Enter during a slash
            # command is sent after it (``codemode.tui.input``).
            mode[0] = int(mode[0]) & ~termios.ICRNL  # iflag
            mode[3] = int(mode[3]) & ~(termios.ECHO | termios.ICANON)  # lflag
            cc = mode[6]
            assert isinstance(cc, list)
            cc[termios.VMIN], cc[termios.VTIME] = 1, 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        except (termios.error, OSError):
            return False
        self._saved = saved
        self._loop = asyncio.get_running_loop()
        try:
            self._loop.add_reader(self.fd, self._readable)
        except (NotImplementedError, OSError, ValueError):
            self._restore()
            return False
        self._running = True
        return True

    def stop(self) -> None:
        """Give the keyboard back as it was (what is in ``typeahead`` stays)."""
        if not self._running:
            return
        self._running = False
        self._cancel_timer()
        if self._pending == bytes([_ESC]):
            self._pending = b""  # an Esc that came at the very end: the turn is over
        if self._loop is not None:
            self._loop.remove_reader(self.fd)
        self._restore()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hand the keyboard back for a while (a question asked during the turn)."""
        was_running = self._running
        self.stop()
        try:
            yield
        finally:
            if was_running:
                self.start()

    def take_typeahead(self) -> str:
        text, self.typeahead = self.typeahead, ""
        return text

    def _restore(self) -> None:
        if self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
            self._saved = None

    # --- reading ---------------------------------------------------------------------

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 1024)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the terminal went away: stop watching it
            self.stop()
            return
        self._cancel_timer()
        self.feed(data)

    def feed(self, data: bytes) -> None:
        """Take ``data`` as typed (public so that tests of the parsing need no terminal);
        called in the event loop."""
        buffer = self._pending + data
        self._pending = b""
        i = 0
        text = bytearray()
        while i < len(buffer):
            byte = buffer[i]
            if byte != _ESC:
                i += 1
                if byte in _BACKSPACES:
                    self._add_text(text)
                    text.clear()
                    self.typeahead = self.typeahead[:-1]
                elif byte >= 0x20 or byte in (0x09, 0x0A, 0x0D):
                    text.append(byte)
                continue  # other control bytes (Ctrl-letters) mean nothing here
            end = _sequence_end(buffer, i)
            if end is None:  # incomplete: wait for the rest
                self._pending = buffer[i:]
                break
            if end == i + 1:  # ESC alone, or ESC ESC
                self._add_text(text)
                text.clear()
                self.on_escape()
            i = end
        self._add_text(text)
        if self._pending == bytes([_ESC]):
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(ESCAPE_DELAY_S, self._lone_escape)

    def _lone_escape(self) -> None:
        self._timer = None
        if self._pending == bytes([_ESC]):
            self._pending = b""
            self.on_escape()

    def _add_text(self, raw: bytearray) -> None:
        if raw:
            self.typeahead = (self.typeahead + raw.decode("utf-8", "replace"))[
                -_TYPEAHEAD_LIMIT:
            ]

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _sequence_end(buffer: bytes, start: int) -> int | None:
    """Where the escape sequence at ``buffer[start]`` (an ESC) ends; ``start + 1`` for a
    lone Esc; None when more bytes are needed to tell."""
    if start + 1 >= len(buffer):
        return None
    second = buffer[start + 1]
    if second == _ESC:
        return start + 1  # Esc, then whatever the second ESC starts
    if second == ord("["):  # CSI: parameters, then a final byte 0x40..0x7E
        for j in range(start + 2, len(buffer)):
            if 0x40 <= buffer[j] <= 0x7E:
                return j + 1
        return None
    if second == ord("O"):  # SS3: one more byte (F1-F4, keypad arrows)
        return start + 3 if start + 2 < len(buffer) else None
    return start + 2  # Alt+key
