"""`interpreter acp` from a hostile or careless client's side: sessions opened in a loop
stay bounded (the least recently used idle one is closed), busy sessions past the bound
are refused, ``session/close`` frees what a session holds, and what the session says
beside the conversation (notices) reaches the editor. Driven by the official ACP SDK's
client over stdio, against the scripted model server."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import McpServerStdio
from agent_support import INTERPRETER, cli_env, provider_flags

from codemode_testkit.scripted_server import ScriptedModelServer

# docs/acp.md: at most this many sessions are open at once unless acp_max_sessions says.
DEFAULT_MAX_SESSIONS = 8
HANG = {"tool_calls": [{"name": "exec", "arguments": {
    "code": "await new Promise((r) => setTimeout(r, 60000));"}}]}  # fmt: skip


class Client:
    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.tool_calls = 0
        self.started = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        if update.session_update == "tool_call":
            self.tool_calls += 1
            self.started.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no permission is asked in these tests")


def _cold(home: Path) -> dict[str, str]:
    """The agent started cold (CODEMODE_WARM=0): these tests count the processes below
    its pid, and a warm agent is the warm server's child (tests/test_warm_*.py)."""
    return {**cli_env(home), "CODEMODE_WARM": "0"}


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def settled(pid: int, quiet_s: float = 1.0, within_s: float = 30.0) -> set[int]:
    """The agent's processes once their number has not changed for ``quiet_s`` (a
    session's command server starts in the background)."""
    deadline = time.monotonic() + within_s
    last, since = descendants(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = descendants(pid)
        if len(now) != len(last):
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return now
    return last


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("home", "work")}
    for d in out.values():
        d.mkdir()
    return out


async def test_sessions_opened_in_a_loop_stay_bounded(dirs: dict[str, Path]) -> None:
    """The attack: a client opens session after session and never closes one. Each holds
    a sandbox with its command server (processes) and more; the agent keeps only the
    newest DEFAULT_MAX_SESSIONS open, and an older one says why it is gone."""
    work = dirs["work"]
    client = Client()
    with ScriptedModelServer([{"text": "first"}, {"text": "continued"}]) as server:
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", *provider_flags(server.base_url, "chat"),
            env=_cold(dirs["home"]), cwd=work,
        ) as (conn, process):  # fmt: skip
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            ids = []
            for _ in range(DEFAULT_MAX_SESSIONS):
                ids.append((await conn.new_session(cwd=str(work), mcp_servers=[])).session_id)
            at_the_bound = settled(process.pid)
            for _ in range(2 * DEFAULT_MAX_SESSIONS):
                ids.append((await conn.new_session(cwd=str(work), mcp_servers=[])).session_id)
            after = settled(process.pid)
            # Every session holds processes of its own; three times as many sessions
            # opened hold no more than the bound's worth.
            assert at_the_bound, "a session holds no process: nothing to measure"
            assert len(after) <= len(at_the_bound), (len(at_the_bound), len(after))
            with pytest.raises(RequestError) as gone:
                await conn.prompt(session_id=ids[0], prompt=[text_block("hello?")])
            assert "was closed to make room" in str(gone.value.data), gone.value.data
            assert "it had no turn, so there is nothing to continue" in str(gone.value.data)
            # The newest are open; a turn makes one the most recently used, and once
            # room is made for another, session/load continues it (it is recorded).
            kept = ids[-DEFAULT_MAX_SESSIONS]
            done = await asyncio.wait_for(
                conn.prompt(session_id=kept, prompt=[text_block("hi")]), 60
            )
            assert done.stop_reason == "end_turn"
            for _ in range(DEFAULT_MAX_SESSIONS):
                await conn.new_session(cwd=str(work), mcp_servers=[])
            with pytest.raises(RequestError, match="session/load continues it"):
                await conn.prompt(session_id=kept, prompt=[text_block("still there?")])
            # Loaded twice at once: one load opens it, the other is told it is open.
            loads = await asyncio.gather(
                *(conn.load_session(cwd=str(work), session_id=kept, mcp_servers=[])
                  for _ in range(2)),
                return_exceptions=True,
            )  # fmt: skip
            refused = [x for x in loads if isinstance(x, RequestError)]
            assert len(refused) == 1 and "is open" in str(refused[0].data), loads
            again = await asyncio.wait_for(
                conn.prompt(session_id=kept, prompt=[text_block("again")]), 60
            )
            assert again.stop_reason == "end_turn"
            assert len(settled(process.pid)) <= len(at_the_bound)
    assert init.agent_capabilities.session_capabilities.close is not None


async def test_busy_sessions_past_the_bound_are_refused_and_close_frees_one(
    dirs: dict[str, Path],
) -> None:
    work = dirs["work"]
    client = Client()
    with ScriptedModelServer([HANG, HANG]) as server:
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", "--code-mode", "-c", "acp_max_sessions=2",
            *provider_flags(server.base_url, "chat"), env=_cold(dirs["home"]), cwd=work,
        ) as (conn, process):  # fmt: skip
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            idle = settled(process.pid)
            a = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            b = (await conn.new_session(cwd=str(work), mcp_servers=[])).session_id
            turns = []
            for session_id in (a, b):
                client.started.clear()
                turns.append(asyncio.ensure_future(
                    conn.prompt(session_id=session_id, prompt=[text_block("wait")])))  # fmt: skip
                await asyncio.wait_for(client.started.wait(), 60)
            busy = settled(process.pid)
            # Both sessions run a turn: a third is refused, and nothing changed.
            with pytest.raises(RequestError) as refused:
                await conn.new_session(cwd=str(work), mcp_servers=[])
            assert refused.value.code == -32010
            assert "each is running a turn" in str(refused.value.data), refused.value.data
            assert "acp_max_sessions = 2" in str(refused.value.data)
            assert not any(t.done() for t in turns)
            # session/close cancels a's turn and stops what a held.
            await conn.close_session(session_id=a)
            cancelled = await asyncio.wait_for(turns[0], 60)
            assert cancelled.stop_reason == "cancelled"
            left = settled(process.pid)
            assert len(idle) < len(left) < len(busy), (len(idle), len(left), len(busy))
            assert not (busy - left) & descendants(process.pid)
            with pytest.raises(RequestError) as closed:
                await conn.prompt(session_id=a, prompt=[text_block("x")])
            assert f"session {a!r} was closed" in str(closed.value.data)
            await conn.close_session(session_id=a)  # again: nothing to do, no error
            with pytest.raises(RequestError, match="no session 'never-opened'"):
                await conn.close_session(session_id="never-opened")
            # There is room again.
            await conn.new_session(cwd=str(work), mcp_servers=[])
            await conn.cancel(session_id=b)
            assert (await asyncio.wait_for(turns[1], 60)).stop_reason == "cancelled"


async def test_notices_reach_the_editor_once_it_knows_the_session(
    dirs: dict[str, Path],
) -> None:
    """A notice while the session opens (MCP servers it was sent and does not start)
    waits for the first prompt; one during the turn (a retried model request) arrives in
    place. Both are message chunks of their own, marked in ``_meta``."""
    work = dirs["work"]
    client = Client()
    script = [{"status": 429, "retry_after": 0.2, "error_message": "slow down"},
              {"text": "hello"}]  # fmt: skip
    mcp = McpServerStdio(name="editor-tools", command="/bin/true", args=[], env=[])
    with ScriptedModelServer(script) as server:
        async with spawn_agent_process(
            client, str(INTERPRETER), "acp", *provider_flags(server.base_url, "chat"),
            env=_cold(dirs["home"]), cwd=work,
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            opened = await conn.new_session(cwd=str(work), mcp_servers=[mcp])
            await asyncio.sleep(0.5)
            assert client.updates == []  # not before the client has the session's id
            done = await asyncio.wait_for(
                conn.prompt(session_id=opened.session_id, prompt=[text_block("hi")]), 60
            )
    assert done.stop_reason == "end_turn"
    chunks = [
        u
        for sid, u in client.updates
        if sid == opened.session_id and u.session_update == "agent_message_chunk"
    ]
    notices = [(u.field_meta or {}).get("codemode", {}).get("notice") for u in chunks]
    kinds = [n["kind"] if n else "model" for n in notices]
    assert kinds[:2] == ["notice", "notice"] and set(kinds[2:]) == {"model"}, kinds
    assert "editor-tools" in notices[0]["message"]
    assert "retrying" in notices[1]["message"] and "429" in notices[1]["message"]
    shown = chunks[1].content.text
    assert shown.startswith("\n\n> codemode: ") and shown.endswith("\n\n"), shown
    assert "".join(u.content.text for u in chunks[2:]) == "hello"
