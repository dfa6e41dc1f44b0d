"""`interpreter acp` driven by an ACP client over stdio: a code-mode turn with nested
tool calls, file reads and writes through the client, permission requests (allowed
once, then denied), streamed message chunks, and a cancelled turn."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.core import AgentSideConnection, ClientSideConnection
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)
from agent_support import INTERPRETER, cli_env, provider_flags

from codemode.acp.client import AcpApprover
from codemode.acp.server import AcpOptions, CodemodeAcpAgent
from codemode.acp.updates import UpdateMapper
from codemode.tools.builtin import builtin_registry
from codemode_testkit.scripted_server import ScriptedModelServer


class RecordingClient:
    """An editor: keeps unsaved buffers, answers permission requests from a list."""

    def __init__(self, buffers: dict[str, str], answers: list[str]) -> None:
        self.buffers = buffers
        self.answers = answers
        self.updates: list[Any] = []
        self.permissions: list[Any] = []
        self.reads: list[str] = []
        self.writes: dict[str, str] = {}
        self.tool_started = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        if update.session_update == "tool_call":
            self.tool_started.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, [o.option_id for o in options]))
        choice = self.answers.pop(0)
        if choice == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        self.reads.append(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes[path] = content
        Path(path).write_text(content, encoding="utf-8")
        return WriteTextFileResponse()


PROGRAM = """
const notes = await tools.read_file({path: "notes.txt"});
await tools.write_file({path: "upper.txt", content: notes.content.toUpperCase()});
await tools.write_file({path: OUTSIDE + "/allowed.txt", content: "yes"});
try {
  await tools.write_file({path: OUTSIDE + "/denied.txt", content: "no"});
} catch (e) { console.log("refused:", e.message); }
return notes.total_lines;
"""


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("home", "work", "outside")}
    for d in out.values():
        d.mkdir()
    (out["work"] / "notes.txt").write_text("saved on disk\n", encoding="utf-8")
    return out


async def test_acp_full_turn_with_permissions_and_cancel(dirs: dict[str, Path]) -> None:
    work, outside = dirs["work"], dirs["outside"]
    program = PROGRAM.replace("OUTSIDE", json.dumps(str(outside)))
    script = [
        {"text": "Let me look.", "tool_calls": [{"name": "exec", "arguments": {"code": program}}]},
        {"text": "Done: upper.txt written, one outside write allowed."},
        {
            "tool_calls": [
                {
                    "name": "exec",
                    "arguments": {"code": "await new Promise((r) => setTimeout(r, 60000));"},
                }
            ]
        },
    ]
    notes = str(work / "notes.txt")
    client = RecordingClient({notes: "unsaved line one\nunsaved line two\n"}, ["once", "deny"])
    with ScriptedModelServer(script) as server:
        async with spawn_agent_process(
            client,
            str(INTERPRETER),
            "acp",
            "--code-mode",
            *provider_flags(server.base_url, "chat"),
            env=cli_env(dirs["home"]),
            cwd=work,
        ) as (conn, _process):
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)
                ),
            )
            assert init.agent_info.name == "codemode"
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            result = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("shout the notes")]),
                60,
            )
            assert result.stop_reason == "end_turn"
            first_turn = list(client.updates)

            client.tool_started.clear()
            pending = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("wait")])
            )
            await asyncio.wait_for(client.tool_started.wait(), 60)
            await conn.cancel(session_id=session.session_id)
            cancelled = await asyncio.wait_for(pending, 60)
            assert cancelled.stop_reason == "cancelled"

    # Streamed message chunks add up to the model's words.
    said = "".join(u.content.text for u in first_turn if u.session_update == "agent_message_chunk")
    assert said == "Let me look.Done: upper.txt written, one outside write allowed."
    starts = {u.tool_call_id: u for u in first_turn if u.session_update == "tool_call"}
    program_id = next(
        i for i, u in starts.items() if (u.raw_input.get("code") or "").strip() == program.strip()
    )
    nested = [u for u in starts.values() if u.field_meta["codemode"]["parent_id"] == program_id]
    assert [u.title.split(" ")[0] for u in nested] == [
        "read_file",
        "write_file",
        "write_file",
        "write_file",
    ]
    assert {u.kind for u in nested} == {"read", "edit"}
    finals = {
        u.tool_call_id: u.status
        for u in first_turn
        if u.session_update == "tool_call_update" and u.status
    }
    assert finals[program_id] == "completed"
    assert [finals[u.tool_call_id] for u in nested] == [
        "completed",
        "completed",
        "completed",
        "failed",
    ]
    # The read went through the editor (its unsaved buffer), the writes too.
    assert client.reads == [notes]
    assert client.writes[str(work / "upper.txt")] == "UNSAVED LINE ONE\nUNSAVED LINE TWO\n"
    assert (outside / "allowed.txt").read_text() == "yes"
    assert not (outside / "denied.txt").exists()
    # Two permission requests, each pointing at the waiting nested call.
    assert len(client.permissions) == 2
    asked = [call.tool_call_id for call, _ in client.permissions]
    assert asked == [nested[2].tool_call_id, nested[3].tool_call_id]
    call, options = client.permissions[0]
    assert options == ["once", "always", "deny"]
    assert call.raw_input["tool"] == "write_file"
    assert str(outside / "allowed.txt") in call.raw_input["justification"]
    program_update = next(
        u
        for u in first_turn
        if u.session_update == "tool_call_update" and u.tool_call_id == program_id and u.status
    )
    assert "refused: write_file: the user declined writing" in program_update.raw_output["output"]
    assert program_update.raw_output["value"] == 2
    # The model saw the program's output in its next request.
    assert "declined" in json.dumps(server.requests[1].body)


async def test_acp_classic_without_fs_capability_and_a_failed_turn(
    dirs: dict[str, Path],
) -> None:
    work = dirs["work"]
    script = [
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
                {"name": "write_file", "arguments": {"path": "copy.txt", "content": "copied"}},
            ]
        },
        {"text": "Copied."},
        {"status": 400, "error_message": "scripted refusal"},
        {"text": "Continued where we left off."},
    ]
    client = RecordingClient({}, [])
    with ScriptedModelServer(script) as server:
        async with spawn_agent_process(
            client,
            str(INTERPRETER),
            "acp",
            *provider_flags(server.base_url, "anthropic"),
            env=cli_env(dirs["home"]),
            cwd=work,
        ) as (conn, _process):
            await conn.initialize(protocol_version=PROTOCOL_VERSION)
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            done = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("copy")]), 60
            )
            assert done.stop_reason == "end_turn"
            with pytest.raises(RequestError) as failed:
                await asyncio.wait_for(
                    conn.prompt(session_id=session.session_id, prompt=[text_block("again")]), 60
                )
            assert "scripted refusal" in str(failed.value)
            with pytest.raises(RequestError, match="no session 'no-such-session'"):
                await conn.prompt(session_id="no-such-session", prompt=[text_block("x")])
        # A new agent process loads the recorded session: history first, then a new turn.
        reloaded = RecordingClient({}, [])
        async with spawn_agent_process(
            reloaded,
            str(INTERPRETER),
            "acp",
            *provider_flags(server.base_url, "anthropic"),
            env=cli_env(dirs["home"]),
            cwd=work,
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            assert init.agent_capabilities.load_session
            await conn.load_session(cwd=str(work), session_id=session.session_id, mcp_servers=[])
            history = list(reloaded.updates)
            more = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("more")]), 60
            )
            assert more.stop_reason == "end_turn"
    # No fs capability: the tools used the disk, and the client saw no fs requests.
    assert client.reads == [] and client.writes == {}
    assert (work / "copy.txt").read_text() == "copied"
    assert "saved on disk" in json.dumps(server.requests[1].body)
    kinds = {
        u.title.split(" ")[0]: u.kind for u in client.updates if u.session_update == "tool_call"
    }
    assert kinds == {"read_file": "read", "write_file": "edit"}
    shown = [
        (u.session_update, getattr(getattr(u, "content", None), "text", None)) for u in history
    ]
    assert ("user_message_chunk", "copy") in shown
    assert ("agent_message_chunk", "Copied.") in shown
    assert ("user_message_chunk", "again") in shown
    assert [u.status for u in history if u.session_update == "tool_call_update"] == [
        "completed",
        "completed",
    ]
    # The loaded session continued with its provider and its whole conversation.
    last = json.dumps(server.requests[-1].body)
    assert "Copied." in last and "more" in last
    said = "".join(
        u.content.text
        for u in reloaded.updates[len(history) :]
        if u.session_update == "agent_message_chunk"
    )
    assert said == "Continued where we left off."


@dataclass(frozen=True)
class SandboxShapedRequest:
    """The fields of the sandbox's ApprovalRequest that an approver reads."""

    tool: str
    command: str
    justification: str | None
    rule: str | None
    program: str | None
    can_remember: bool

    def summary(self) -> str:
        return f"{self.tool} wants to run: {self.command}\nreason: {self.justification}"


async def test_acp_approver_answers_sandbox_shaped_requests() -> None:
    """The approver over a real ACP connection pair (a socket pair), as the sandbox will
    call it: the waiting call is referenced, "always" is not offered when it cannot be
    remembered, and a cancelled question is a denial."""
    left, right = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=left)
    client_reader, client_writer = await asyncio.open_connection(sock=right)
    client = RecordingClient({}, ["once", "cancelled"])
    agent_conn = AgentSideConnection(CodemodeAcpAgent(AcpOptions()), agent_writer, agent_reader)
    ClientSideConnection(client, client_writer, client_reader)
    flushed: list[bool] = []

    async def flush() -> None:
        flushed.append(True)

    approver = AcpApprover(
        agent_conn,
        "s1",
        open_call_for=lambda tool: "item_7" if tool == "shell" else None,
        flush=flush,
        kind_for=UpdateMapper(str(Path.cwd()), builtin_registry()).kind_for,
    )
    request = SandboxShapedRequest(
        tool="shell",
        command="git push origin main",
        justification="pushing needs a person",
        rule='prefix_rule(pattern=["git", "push"], decision="prompt")',
        program='await tools.shell({command: "git push origin main"})',
        can_remember=False,
    )
    assert await approver(request) == "once"
    call, options = client.permissions[0]
    assert call.tool_call_id == "item_7" and call.kind == "execute"
    assert call.title == "shell wants to run: git push origin main"
    assert call.raw_input["rule"].startswith("prefix_rule(")
    assert call.raw_input["program"].startswith("await tools.shell")
    assert options == ["once", "deny"]
    assert flushed == [True]

    other = SandboxShapedRequest("write_file", "write /etc/x", None, None, None, True)
    assert await approver(other) == "deny"
    for writer in (agent_writer, client_writer):
        writer.close()


async def test_acp_asks_the_editor_about_commands_the_policy_marks_prompt(
    dirs: dict[str, Path],
) -> None:
    work = dirs["work"]
    script = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "git reset --hard"}}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "git reset --hard HEAD"}}]},
        {"text": "done"},
    ]
    client = RecordingClient({}, ["once", "deny"])
    with ScriptedModelServer(script) as server:
        async with spawn_agent_process(
            client,
            str(INTERPRETER),
            "acp",
            *provider_flags(server.base_url, "chat"),
            env=cli_env(dirs["home"]),
            cwd=work,
        ) as (conn, _process):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
            )
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            result = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("reset")]), 60
            )
    assert result.stop_reason == "end_turn"
    assert [call.raw_input["command"] for call, _ in client.permissions] == [
        "git reset --hard",
        "git reset --hard HEAD",
    ]
    assert "discards uncommitted changes" in client.permissions[0][0].raw_input["justification"]
    allowed = server.requests[1].body["messages"][-1]["content"]
    denied = server.requests[2].body["messages"][-1]["content"]
    assert "not a git repository" in allowed  # approved once: it ran
    assert "not a git repository" not in denied and "declined" in denied
