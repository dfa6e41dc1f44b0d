"""`session/load` shows an editor the tool calls it saw live, checked on the raw JSON-RPC
messages (a typed client would hide a JSON string where an object belongs) and with the
ACP SDK's own zod schemas (npm @agentclientprotocol/sdk, installed by
scripts/setup-test-servers.sh); and `interpreter acp` ends quietly when stdin is closed."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env, provider_flags

from codemode_testkit.scripted_server import ScriptedModelServer

ROOT = Path(__file__).resolve().parent.parent
ACP_SDK = ROOT / ".cache" / "acp-sdk" / "node_modules" / "@agentclientprotocol" / "sdk"
ZOD_SCHEMAS = ACP_SDK / "dist" / "v1" / "schema" / "zod.gen.js"

PROGRAM = """\
await tools.update_plan({plan: [
  {step: "Read the notes", status: "completed"},
  {step: "Shout them", status: "in_progress"},
  {step: "Report", status: "pending"},
]});
const f = await tools.read_file({path: "notes.txt"});
const [a, b] = await Promise.all([
  tools.glob({pattern: "*.txt"}),
  tools.list_dir({path: "."}),
]);
console.log(f.content.toUpperCase());
return {lines: f.total_lines, files: a.matches.length};
"""


class RawClient:
    """A minimal editor speaking JSON-RPC lines to `interpreter acp`, keeping every line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.notifications: list[dict[str, Any]] = []
        self._next = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()
        while True:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), 60)
            assert raw, "the agent closed its stdout before answering " + method
            message = json.loads(raw)
            if message.get("id") == ident and "method" not in message:
                assert "error" not in message, message
                return dict(message["result"] or {})
            if "method" in message and "id" in message:  # a request to the editor
                refusal = {"jsonrpc": "2.0", "id": message["id"],
                           "error": {"code": -32601, "message": "not offered"}}
                self.proc.stdin.write(json.dumps(refusal).encode() + b"\n")
            elif message.get("method") == "session/update":
                self.notifications.append(message)


async def _session(home: Path, work: Path, base_url: str, steps: Any) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        str(INTERPRETER), "acp", "--code-mode", *provider_flags(base_url, "chat"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, cwd=work, env=cli_env(home),
    )
    client = RawClient(proc)
    try:
        await client.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await steps(client)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0
    return client.notifications


def _updates(notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [n["params"]["update"] for n in notes]


def _tool_view(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """What an editor keeps of the tool calls and the plan: each call's start, its final
    update, and the plans in order (a running program's partial output is live-only)."""
    starts = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    finals = {
        u["toolCallId"]: u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    }
    plans = [u for u in updates if u["sessionUpdate"] == "plan"]
    return {"starts": starts, "finals": finals, "plans": plans}


def _said(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


def _record_live_and_replay(tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("one\ntwo\n", encoding="utf-8")
    script = [
        {"text": "Planning.", "tool_calls": [{"name": "exec", "arguments": {"code": PROGRAM}}]},
        {"text": "Two lines, shouted."},
    ]
    session_id: list[str] = []

    async def live(client: RawClient) -> None:
        made = await client.request("session/new", {"cwd": str(work), "mcpServers": []})
        session_id.append(made["sessionId"])
        done = await client.request(
            "session/prompt",
            {"sessionId": made["sessionId"], "prompt": [{"type": "text", "text": "shout"}]},
        )
        assert done["stopReason"] == "end_turn"

    async def load(client: RawClient) -> None:
        await client.request(
            "session/load", {"cwd": str(work), "sessionId": session_id[0], "mcpServers": []}
        )

    with ScriptedModelServer(script) as server:
        first = asyncio.run(_session(home, work, server.base_url, live))
        second = asyncio.run(_session(home, work, server.base_url, load))
    return first, second


def test_replayed_tool_calls_equal_the_live_ones(tmp_path: Path) -> None:
    live_notes, replay_notes = _record_live_and_replay(tmp_path)
    live, replay = _updates(live_notes), _updates(replay_notes)
    seen, shown = _tool_view(live), _tool_view(replay)

    program = seen["starts"][0]
    assert program["title"] == f"Run program ({len(PROGRAM.strip().splitlines())} lines)"
    assert program["rawInput"] == {"code": PROGRAM.strip()}  # an object, not a JSON string
    nested = [s for s in seen["starts"] if s["_meta"]["codemode"]["parent_id"]]
    # (update_plan inside the program shows as the plan, below, not as a call)
    assert [s["title"] for s in nested] == [
        "read_file notes.txt (in program)",
        "glob *.txt (in program)",
        "list_dir . (in program)",
    ]
    assert {s["_meta"]["codemode"]["parent_id"] for s in nested} == {program["toolCallId"]}
    statuses = [[e["status"] for e in p["entries"]] for p in seen["plans"]]
    assert statuses == [["completed", "in_progress", "pending"]]

    # The replay is the same calls, ids, titles, inputs, results and plan.
    assert shown["starts"] == seen["starts"]
    assert shown["finals"] == seen["finals"]
    assert shown["plans"] == seen["plans"]
    assert seen["finals"][program["toolCallId"]]["rawOutput"]["value"] == {"lines": 2, "files": 1}
    # ...and the same conversation around them, with the prompt shown first.
    assert _said(replay) == _said(live) == "Planning.Two lines, shouted."
    assert replay[0] == {
        "sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "shout"}
    }


def test_live_and_replayed_updates_pass_the_sdk_schemas(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not ZOD_SCHEMAS.is_file():
        log = ACP_SDK.parent.parent.parent / "install.log"
        detail = log.read_text(errors="replace")[-400:] if log.is_file() else "no install log"
        pytest.skip(f"@agentclientprotocol/sdk is not installed: {detail}")
    live_notes, replay_notes = _record_live_and_replay(tmp_path)
    checker = tmp_path / "check.mjs"
    checker.write_text(
        f"import {{ zSessionNotification }} from {json.dumps(ZOD_SCHEMAS.as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const input = JSON.parse(readFileSync(process.argv[2], 'utf8'));\n"
        "const out = {};\n"
        "for (const [name, notes] of Object.entries(input)) {\n"
        "  out[name] = notes.map((n) => {\n"
        "    const r = zSessionNotification.safeParse(n.params);\n"
        "    if (!r.success) { console.error(JSON.stringify(r.error.issues)); process.exit(2); }\n"
        "    return r.data;\n"
        "  });\n"
        "}\n"
        "console.log(JSON.stringify(out));\n",
        encoding="utf-8",
    )
    data = tmp_path / "notes.json"
    data.write_text(json.dumps({"live": live_notes, "replay": replay_notes}), encoding="utf-8")
    done = subprocess.run(
        [node, str(checker), str(data)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    live = [n["update"] for n in parsed["live"]]
    replay = [n["update"] for n in parsed["replay"]]
    # The schemas drop what they do not know; what they keep must still agree, and keep
    # the fields an editor draws from.
    assert _tool_view(replay) == _tool_view(live)
    start = _tool_view(live)["starts"][0]
    assert start["rawInput"] == {"code": PROGRAM.strip()} and start["kind"] == "execute"
    assert len(_tool_view(live)["starts"]) == 4  # the plan is a plan update, not a call
    assert [n["params"]["update"] for n in replay_notes] != []


@pytest.mark.parametrize("stdin", ["devnull", "closed", "file"])
def test_acp_ends_quietly_when_stdin_has_nothing(tmp_path: Path, stdin: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    request = tmp_path / "in.jsonl"
    request.write_text(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": 1}}) + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.txt"  # stdout a regular file, as when an editor logs to one
    source: Any = {"devnull": subprocess.DEVNULL, "closed": None, "file": None}[stdin]
    with out.open("wb") as sink:
        if stdin == "file":
            with request.open("rb") as handle:
                done = subprocess.run([str(INTERPRETER), "acp"], stdin=handle, stdout=sink,
                                      stderr=subprocess.PIPE, env=cli_env(home), timeout=30)
        elif stdin == "closed":
            # `interpreter acp <&-`: the child starts with descriptor 0 closed.
            done = subprocess.run(
                ["/bin/sh", "-c", 'exec "$0" acp <&-', str(INTERPRETER)],
                stdout=sink, stderr=subprocess.PIPE, env=cli_env(home), timeout=30,
            )
        else:
            done = subprocess.run([str(INTERPRETER), "acp"], stdin=source, stdout=sink,
                                  stderr=subprocess.PIPE, env=cli_env(home), timeout=30)
    assert done.returncode == 0
    assert done.stderr == b""
    written = out.read_text(encoding="utf-8")
    if stdin == "file":
        answer = json.loads(written)
        assert answer["result"]["agentInfo"]["version"] == _version()
    else:
        assert written == ""


def _version() -> str:
    from importlib.metadata import version

    return version("codemode")


def test_acp_ends_quietly_on_a_pipe_closed_at_once(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(INTERPRETER), "acp"], input=b"", capture_output=True, timeout=30,
        env=cli_env(tmp_path),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
