"""What one client of `interpreter acp` may hold: sessions opened without end are
refused past the cap with a specific error, and the sessions it has keep working."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process
from acp.schema import ClientCapabilities
from agent_support import INTERPRETER, cli_env, provider_flags

from codemode_testkit.scripted_server import ScriptedModelServer

CAP = 32  # docs/acp.md


class Editor:
    async def session_update(self, session_id: str, update: object, **kwargs: object) -> None:
        pass


async def test_sessions_past_the_cap_are_refused(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with ScriptedModelServer([]) as server:
        async with spawn_agent_process(
            Editor(), str(INTERPRETER), "acp", *provider_flags(server.base_url, "chat"),
            env=cli_env(home), cwd=work,
        ) as (conn, _process):  # fmt: skip
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
            )
            ids = [(await conn.new_session(cwd=str(work))).session_id for _ in range(CAP)]
            assert len(set(ids)) == CAP
            with pytest.raises(RequestError) as caught:
                await conn.new_session(cwd=str(work))
            assert str(CAP) in str(caught.value.data or caught.value), caught.value
