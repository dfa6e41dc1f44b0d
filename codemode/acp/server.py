"""The ACP agent: sessions, prompt turns, cancellation, over stdio.

One ACP session is one of our ``Session`` objects (recorded like any other, so
``interpreter resume`` can continue it). Its events are mapped to session updates and
sent in order by one sender task per session; a prompt returns only after everything
its turn produced has been sent. What a session says while it opens (notices) waits
until the client knows the session: its first prompt, or the end of its replay.
``session/close`` ends one; at most ``acp_max_sessions`` are open (``table.py``).
"""

from __future__ import annotations

import asyncio
import base64
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)
from acp.schema import StopReason as AcpStopReason

from codemode.acp.client import AcpApprover, AcpToolClient
from codemode.acp.history import replay_updates
from codemode.acp.live import LiveSession
from codemode.acp.notices import WORKSPACE_RECOVERED, notice_update
from codemode.acp.table import SessionTable, invalid
from codemode.agent.turn_result import StopReason
from codemode.providers.base import ImageInput

if TYPE_CHECKING:
    from codemode.config import Config


@dataclass
class AcpOptions:
    """What ``interpreter acp`` was started with; applies to every session."""

    overrides: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    code_mode: bool | None = None
    # --sandbox / --approval / --full-auto; None: the config's.
    sandbox_mode: str | None = None
    approval_policy: str | None = None
    full_auto: bool = False


# How a turn's stop reason reads in ACP; the others fail the prompt request.
_ACP_STOP_REASONS: dict[StopReason, AcpStopReason] = {
    "completed": "end_turn",
    "max_turns": "max_turn_requests",
    "cancelled": "cancelled",
    # A UserPromptSubmit hook refused the prompt; a hook ended the turn (continue: false).
    "prompt_blocked": "refusal",
    "hook_stopped": "end_turn",
}


def prompt_input(blocks: list[Any]) -> tuple[str, list[ImageInput]]:
    """The text and images of an ACP prompt. Linked resources are named in the text;
    embedded ones are included in it."""
    parts: list[str] = []
    images: list[ImageInput] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            images.append(ImageInput(mime_type=block.mime_type, data=block.data))
        elif kind == "resource_link":
            parts.append(f"[{block.name}]({block.uri})")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            if text is None:
                blob = base64.b64decode(getattr(res, "blob", "") or "")
                text = f"({len(blob)} bytes of binary content)"
            parts.append(f'<context uri="{res.uri}">\n{text}\n</context>')
    return "\n\n".join(parts), images


class CodemodeAcpAgent:
    """The ``acp.Agent`` implementation."""

    def __init__(self, options: AcpOptions) -> None:
        self.options = options
        self.conn: Any = None
        self.capabilities = ClientCapabilities()
        self.sessions: SessionTable[LiveSession] = SessionTable()
        # Ids being loaded: two loads of one session at once would open it twice.
        self._loading: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: object,
    ) -> InitializeResponse:
        from codemode.version import package_version

        self.capabilities = client_capabilities or ClientCapabilities()
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=True, embedded_context=True),
                session_capabilities=SessionCapabilities(close=SessionCloseCapabilities()),
            ),
            agent_info=Implementation(name="codemode", title="codemode", version=package_version()),
        )

    async def authenticate(self, method_id: str, **kwargs: object) -> None:
        return None

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: object
    ) -> NewSessionResponse:
        live = await self._open(cwd, mcp_servers, None)
        return NewSessionResponse(session_id=live.session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **kwargs: object
    ) -> LoadSessionResponse:
        """Continue a recorded session; its conversation is sent to the client first."""
        from codemode.agent.rollout import SESSIONS_DIR, RolloutError, find_session, read_session
        from codemode.config import codemode_home

        if session_id in self.sessions or session_id in self._loading:
            raise invalid(f"session {session_id} is open")
        try:
            recorded = read_session(find_session(codemode_home() / SESSIONS_DIR, session_id))
        except RolloutError as exc:
            raise invalid(str(exc)) from None
        self._loading.add(session_id)
        try:
            live = await self._open(cwd, mcp_servers, recorded)
        finally:
            self._loading.discard(session_id)
        live.loading = True
        try:
            for update in replay_updates(recorded.path, live.mapper.cwd, live.mapper.tools):
                live.queue.put_nowait(update)
            live.announce()  # after the conversation: what it said as it opened again
            await live.flush()
        finally:
            live.loading = False
        return LoadSessionResponse()

    async def close_session(self, session_id: str, **kwargs: object) -> CloseSessionResponse:
        """End a session (a running turn is cancelled first); closing one already closed
        is not an error."""
        live = self.sessions.close(session_id)
        if live is None:
            if self.sessions.closed(session_id):
                return CloseSessionResponse()
            raise invalid(f"no session {session_id!r}")
        await live.close()
        return CloseSessionResponse()

    async def _open(self, cwd: str, mcp_servers: list[Any] | None, recorded: Any) -> LiveSession:
        """Open a session in a slot of the table (closing an idle one to make room)."""
        from codemode.config import ConfigError, load_config

        if not Path(cwd).is_dir():
            raise invalid(f"cwd is not a directory: {cwd}")
        try:
            config = load_config(self.options.overrides)
        except ConfigError as exc:
            raise invalid(str(exc)) from None
        room = self.sessions.reserve(config.acp_max_sessions)
        try:
            if room is not None:
                await room.close()
            live = self._build(config, cwd, mcp_servers, recorded)
        except BaseException:
            self.sessions.release()
            raise
        self.sessions.opened(live)
        return live

    def _build(
        self, config: Config, cwd: str, mcp_servers: list[Any] | None, recorded: Any
    ) -> LiveSession:
        from codemode.agent.rollout import new_session_id
        from codemode.assembly.options import SessionOptions, SessionSpec
        from codemode.assembly.session import build_session
        from codemode.config import ConfigError
        from codemode.harnesses.catalog import UnknownHarnessError
        from codemode.providers.base import AuthenticationError
        from codemode.tools.store.recovery import recover_at_start

        workspace = Path(cwd)
        notices = []
        if mcp_servers:
            names = ", ".join(str(getattr(m, "name", "?")) for m in mcp_servers)
            notices.append(notice_update(f"MCP servers from the client are not started: {names}"))
            print(f"codemode acp: MCP servers from the client are not started: {names}",
                  file=sys.stderr)
        # Before the session reads anything: a rolled-back write is said on stderr (the
        # editor's log of the agent) and, once the client knows the session, to it.
        for line in recover_at_start(workspace.resolve()):
            notices.append(notice_update(line, WORKSPACE_RECOVERED))
        session_id = recorded.meta.id if recorded is not None else new_session_id()
        live = LiveSession(self.conn, session_id, str(workspace.resolve()))
        for update in notices:
            live.put(update)
        # Commands the execpolicy marks `prompt`, and file edits, are asked about in the
        # editor; file reads and writes go through its buffers.
        approver = AcpApprover(
            self.conn,
            session_id,
            open_call_for=live.mapper.open_call_for,
            flush=live.flush,
            kind_for=live.mapper.kind_for,
        )
        spec = SessionSpec(
            listeners=[live.on_event],
            resume=recorded,
            session_id=session_id,
            approver=approver,
            client=AcpToolClient(self.conn, session_id, self.capabilities.fs, approver),
            untrusted_hooks_hint=": trust them with `interpreter hooks trust`",
        )
        try:
            session = build_session(
                config,
                SessionOptions(
                    cwd=workspace,
                    overrides=self.options.overrides,
                    model=self.options.model,
                    provider=self.options.provider,
                    code_mode=self.options.code_mode,
                    sandbox_mode=self.options.sandbox_mode,
                    approval_policy=self.options.approval_policy,
                    full_auto=self.options.full_auto,
                ),
                spec,
            )
        except (ConfigError, UnknownHarnessError) as exc:
            live.sender.cancel()
            raise invalid(str(exc)) from None
        except AuthenticationError as exc:  # no key: ACP's "authentication required"
            live.sender.cancel()
            raise RequestError(-32000, str(exc), {"message": str(exc)}) from None
        except BaseException:
            live.sender.cancel()
            raise
        live.attach(session)
        return live

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: object) -> PromptResponse:
        live = self.sessions.use(session_id)
        if live.turn is not None:
            raise RequestError(-32600, "a turn is already running")
        text, images = prompt_input(prompt)
        if not text.strip() and not images:
            raise invalid("the prompt has no text or image content")
        assert live.session is not None  # attached when it was opened
        live.announce()
        turn = asyncio.create_task(live.session.run_turn(text, images))
        live.turn = turn
        try:
            await asyncio.wait({turn})
        finally:
            live.turn = None
        await live.flush()
        # A cancelled turn raised out of run_turn; the session kept its result.
        result = live.session.last_result if turn.cancelled() else turn.result()
        reason = result.stop_reason if result is not None else "cancelled"
        if reason in _ACP_STOP_REASONS:
            return PromptResponse(stop_reason=_ACP_STOP_REASONS[reason])
        raise RequestError(-32603, (result.error if result else None) or "the turn failed")

    async def cancel(self, session_id: str, **kwargs: object) -> None:
        live = self.sessions.find(session_id)
        if live is not None and live.turn is not None:
            live.turn.cancel()

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: object) -> None:
        raise RequestError.method_not_found("session/set_mode")

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def close(self) -> None:
        for live in self.sessions.values():
            self.sessions.close(live.session_id)
            await live.close()


async def serve(options: AcpOptions) -> None:
    """Run the agent on stdin/stdout until the client closes the connection."""
    from acp import run_agent

    from codemode.acp.stdio import stdio_streams

    agent = CodemodeAcpAgent(options)
    try:
        writer, reader = await stdio_streams()
        # The SDK (0.12) still routes session/close only under its "unstable" flag; ACP
        # stabilised it (sessionCapabilities.close). Nothing else we serve is unstable.
        await run_agent(agent, writer, reader, use_unstable_protocol=True)
    finally:
        await agent.close()
