"""What the slash commands, the first-run wizard and the missing-key fixer use of the
interactive app (``app.InteractiveApp`` is the one implementation).

They act on the app it gives them; naming what they need here, below both, keeps them
from importing the app that imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rich.console import Console

    from codemode.agent.loop import Session
    from codemode.agent.rollout import RecordedSession
    from codemode.assembly.options import SessionOptions
    from codemode.config import Config
    from codemode.tui.render import TerminalRenderer
    from codemode.tui.snapshots import Snapshots


class Reader(Protocol):
    """The input line, for a question outside a turn."""

    @property
    def interactive(self) -> bool:
        """Whether someone is at a terminal to answer."""
        ...

    async def ask_text(self, question: str, default: str = "", secret: bool = False) -> str: ...


class App(Protocol):
    """The interactive app as a command sees it."""

    # Set by /exit: the loop ends after this command.
    done: bool
    # Said to the model with the next message (after /undo).
    pending_note: str | None

    @property
    def options(self) -> SessionOptions:
        """What the next session is built with (/model changes its provider and model)."""
        ...

    @property
    def config(self) -> Config: ...

    @property
    def cwd(self) -> Path: ...

    @property
    def console(self) -> Console: ...

    @property
    def renderer(self) -> TerminalRenderer: ...

    @property
    def reader(self) -> Reader: ...

    @property
    def snapshots(self) -> Snapshots: ...

    @property
    def session(self) -> Session | None: ...

    @property
    def sandbox_mode(self) -> str: ...

    @property
    def approval_policy(self) -> str: ...

    def provider_name(self) -> str: ...

    def set_permissions(self, sandbox_mode: str, approval_policy: str) -> None: ...

    def switch_harness(self, name: str, dialect: str) -> None: ...

    def record_settings(self) -> None: ...

    async def replace_session(self, resume: RecordedSession | None = None) -> None: ...
