"""One open ACP session: our ``Session``, the task that sends its updates in order, and
its running turn (``server.py`` opens and closes them; ``table.py`` bounds them)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import BaseModel

from codemode.acp.updates import Update, UpdateMapper
from codemode.agent.loop import Session
from codemode.agent.turn_result import TurnResult


class LiveSession:
    """One ACP session: our session, its update sender, and the running turn.

    Made before the session it carries (whose approver and editor client need the
    sender's ``flush`` and the mapper's open calls); ``attach`` hands it the session.
    """

    def __init__(self, conn: Any, session_id: str, cwd: str) -> None:
        self.conn = conn
        self.session_id = session_id
        self.session: Session | None = None
        # Its tools come with the session (``attach``): a call's ACP kind is its tool's.
        self.mapper = UpdateMapper(cwd)
        self.queue: asyncio.Queue[Update] = asyncio.Queue()
        self.sender = asyncio.create_task(self._send())
        self.turn: asyncio.Task[TurnResult] | None = None
        # Updates made before the client has the session's id (its notices while it
        # opens): an update for a session it does not know yet would be dropped.
        self.held: list[Update] | None = []
        self.loading = False  # its recorded conversation is being sent (session/load)

    @property
    def busy(self) -> bool:
        """Running a turn or being loaded: not a session to close to make room."""
        return self.turn is not None or self.loading

    @property
    def recorded(self) -> bool:
        rollout = self.session.rollout if self.session is not None else None
        return rollout is not None and rollout.path.exists()

    def attach(self, session: Session) -> None:
        self.session = session
        self.mapper.tools = session.runner.registry

    def on_event(self, event: BaseModel) -> None:
        for update in self.mapper.updates(event):
            self.put(update)

    def put(self, update: Update) -> None:
        if self.held is not None:
            self.held.append(update)
        else:
            self.queue.put_nowait(update)

    def announce(self) -> None:
        """The client knows the session now: what was held goes out."""
        held, self.held = self.held or [], None
        for update in held:
            self.queue.put_nowait(update)

    async def _send(self) -> None:
        while True:
            update = await self.queue.get()
            try:
                await self.conn.session_update(session_id=self.session_id, update=update)
            except Exception:  # a client that went away: nothing left to tell
                pass
            finally:
                self.queue.task_done()

    async def flush(self) -> None:
        await self.queue.join()

    async def close(self) -> None:
        """Cancel the running turn (its prompt answers ``cancelled``), send what it said,
        then stop the session: engine worker, command server, MCP servers, provider."""
        if self.turn is not None:
            self.turn.cancel()
            with contextlib.suppress(BaseException):
                await self.turn
        if not self.sender.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), _LAST_UPDATES_S)
        self.sender.cancel()
        with contextlib.suppress(BaseException):
            await self.sender
        while not self.queue.empty():  # not sent: nobody waits on them (flush returns)
            self.queue.get_nowait()
            self.queue.task_done()
        if self.session is not None:
            await self.session.aclose()


# How long a closing session's last updates may take to reach a client that reads slowly.
_LAST_UPDATES_S = 5.0
