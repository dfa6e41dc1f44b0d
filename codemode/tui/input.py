"""Reading what the user types: prompt-toolkit on a terminal, plain lines otherwise.

On a terminal: history (kept in ``$CODEMODE_HOME/history``), Enter sends, Alt-Enter or
Ctrl-J inserts a newline (pasted text keeps its newlines), Tab completes slash
commands and ``@path`` mentions. Ctrl-C raises KeyboardInterrupt, Ctrl-D EOFError,
as the interactive loop expects. While a turn or a slash command runs, ``watching``
reads the keyboard (``codemode.tui.keys``): Esc interrupts it, and text typed meanwhile
starts the next input line. Typed during a turn, it is only shown (the user typed
blind while the answer scrolled by, and sees it before it goes). Typed during a slash
command (``/new`` starting a session, say), a line ended with Enter is sent as soon as
the command is done, as a shell runs what was typed ahead: the user typed it for the
prompt that was about to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from codemode.tui.keys import KeyWatcher

PROMPT = "› "


class PlainReader:
    """Lines from stdin (not a terminal): one line is one message."""

    def __init__(self) -> None:
        self.interactive = False

    async def read(self) -> str:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            raise EOFError
        return line.rstrip("\n")

    @contextlib.contextmanager
    def watching(self, on_escape: Callable[[], None], *, submit: bool = False) -> Iterator[None]:
        """No keyboard to watch: input is piped in."""
        yield

    async def ask(self, question: str, choices: dict[str, str]) -> str:
        print(question, flush=True)
        line = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()
        return choices.get(line[:1], "deny")

    async def ask_text(self, question: str, default: str = "", secret: bool = False) -> str:
        print(question, flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            raise EOFError
        return line.strip() or default


class TerminalReader:
    """The prompt-toolkit input line."""

    def __init__(self, history_file: Path, cwd: Path, commands: Iterable[str]) -> None:
        self.interactive = True
        try:
            history_file.parent.mkdir(parents=True, exist_ok=True)
            history: History = FileHistory(str(history_file))
        except OSError:
            history = InMemoryHistory()
        self._session: PromptSession[str] = PromptSession(
            history=history,
            completer=_Completer(cwd, sorted(commands)),
            complete_while_typing=False,
            key_bindings=_bindings(),
            multiline=False,
            enable_open_in_editor=False,
        )
        self._watcher: KeyWatcher | None = None
        self._typeahead = ""  # typed while the last turn or command ran, not sent yet
        self._sent: list[str] = []  # lines sent with Enter while a slash command ran

    async def read(self) -> str:
        if self._sent:
            # Shown on its input line as if typed there, and sent.
            line = self._sent.pop(0)
            return await self._session.prompt_async(PROMPT, default=line, accept_default=True)
        typed, self._typeahead = self._typeahead.strip("\n"), ""
        return await self._session.prompt_async(PROMPT, default=typed)

    @contextlib.contextmanager
    def watching(self, on_escape: Callable[[], None], *, submit: bool = False) -> Iterator[None]:
        """While the body runs (a turn, or a slash command when ``submit``): Esc calls
        ``on_escape``; typed text is kept, and with ``submit`` each line ended with
        Enter is sent next (see the module docstring)."""
        watcher = KeyWatcher(sys.stdin.fileno(), on_escape)
        self._watcher = watcher if watcher.start() else None
        try:
            yield
        finally:
            self._watcher = None
            watcher.stop()
            self._keep(watcher.take_typeahead(), submit=submit)

    def _keep(self, typed: str, *, submit: bool) -> None:
        """Take what was typed while a turn (or, ``submit``, a command) ran: Enter is
        ``\r`` in it (``KeyWatcher``)."""
        if not submit:
            self._typeahead += typed.replace("\r", "\n")
            return
        # A newline ends a line here too: typed in the instant before the keyboard was
        # taken, Enter reached the terminal in its normal mode, which makes it one.
        *lines, rest = (self._typeahead + typed.replace("\n", "\r")).split("\r")
        self._sent += [line for line in lines if line.strip()]
        self._typeahead = rest

    def _paused(self) -> contextlib.AbstractContextManager[None]:
        # A question in the middle of a turn reads the keyboard itself.
        return self._watcher.paused() if self._watcher is not None else contextlib.nullcontext()

    async def ask(self, question: str, choices: dict[str, str]) -> str:
        """One key picks an answer; Ctrl-C, Ctrl-D or Escape deny."""
        kb = KeyBindings()
        for key, answer in choices.items():
            kb.add(key)(_exit_with(answer))
        for key in ("c-c", "c-d", "escape"):
            kb.add(key)(_exit_with("deny"))
        kb.add("<any>")(lambda event: None)  # other keys do nothing
        session: PromptSession[str] = PromptSession(key_bindings=kb)
        with self._paused():
            # Asked in the middle of a turn: leave the turn's SIGINT handler in place.
            return await session.prompt_async(question, handle_sigint=False)

    async def ask_text(self, question: str, default: str = "", secret: bool = False) -> str:
        """A line of text; ``secret`` hides what is typed (an API key)."""
        session: PromptSession[str] = PromptSession(is_password=secret)
        with self._paused():
            answer = await session.prompt_async(question)
        return answer.strip() or default


def _exit_with(answer: str) -> Callable[[KeyPressEvent], None]:
    def handler(event: KeyPressEvent) -> None:
        event.app.exit(result=answer)

    return handler


def _bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        # Ctrl-C clears a line being typed; on an empty line it is the way out.
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    @kb.add("escape", "enter")
    @kb.add("c-j")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


class _Completer(Completer):
    """Slash commands at the start of the line; paths after ``@``."""

    def __init__(self, cwd: Path, commands: list[str]) -> None:
        self.cwd = cwd
        self.commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for name in self.commands:
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text))
            return
        word = text.split()[-1] if text and not text[-1].isspace() else ""
        if word.startswith("@"):
            for candidate in complete_path(self.cwd, word[1:]):
                yield Completion("@" + candidate, start_position=-len(word))


# Entries of a folder looked at for one completion.
COMPLETION_ENTRIES = 20_000


def complete_path(cwd: Path, partial: str, limit: int = 50) -> list[str]:
    """Workspace paths starting with ``partial`` (directories end with ``/``), among the
    first ``COMPLETION_ENTRIES`` entries of the folder: completion runs at each key, and
    a command can fill a folder with millions."""
    head, _, tail = partial.rpartition("/")
    base = (cwd / head) if head else cwd
    matched: list[tuple[str, bool]] = []
    try:
        with os.scandir(base) as listing:
            for entry in itertools.islice(listing, COMPLETION_ENTRIES):
                name = entry.name
                if not name.startswith(tail) or (name.startswith(".") and not tail.startswith(".")):
                    continue
                try:
                    is_dir = entry.is_dir()  # (the listing's type, or one stat)
                except OSError:
                    is_dir = False
                matched.append((name, is_dir))
    except OSError:
        return []
    out = []
    for name, is_dir in sorted(matched)[:limit]:
        rel = f"{head}/{name}" if head else name
        out.append(rel + "/" if is_dir else rel)
    return out
