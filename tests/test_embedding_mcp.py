"""`interpreter mcp-server` as an embedder meets it, driven by the official MCP client
over stdio: the handshake as the SDK answers it, a per-call time limit, a short
description with the rest behind describe_tool, and the output cap the docs state."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from agent_support import INTERPRETER, cli_env

from codemode.mcp.server import RESULT_FIELD_CHARS

ROOT = Path(__file__).resolve().parents[1]


async def _with_server(home: Path, cwd: Path, *args: str, body: Any) -> tuple[Any, str]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(INTERPRETER), args=["mcp-server", *args], cwd=cwd, env=cli_env(home)
    )
    log = home / "server-stderr.log"
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            result = await body(client)
    return result, log.read_text()


def test_official_client_runs_programs_with_a_per_call_time_limit(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "a.txt").write_text("alpha\n")

    async def body(client: Any) -> Any:
        listed = await client.list_tools()
        quick = await client.call_tool(
            "execute", {"code": "return (await tools.read_file({path: 'a.txt'})).content"}
        )
        started = time.monotonic()
        limited = await client.call_tool(
            "execute", {"code": "while (true) {}", "timeout_ms": 500}
        )
        limited_s = time.monotonic() - started
        described = await client.call_tool("describe_tool", {"name": "read_file"})
        big = await client.call_tool(
            "execute", {"code": "console.log('x'.repeat(200000)); return 'y'.repeat(200000)"}
        )
        return listed, quick, limited, limited_s, described, big

    (listed, quick, limited, limited_s, described, big), stderr = asyncio.run(
        _with_server(home, work, "-c", "exec_timeout_s=60", body=body)
    )
    assert "Traceback" not in stderr, stderr
    tools = {t.name: t for t in listed.tools}
    execute = tools["execute"]
    props = execute.input_schema["properties"]
    assert set(props) == {"code", "timeout_ms"}
    assert "60000" in props["timeout_ms"]["description"]
    assert execute.input_schema["required"] == ["code"]
    # brief: types and a sentence per tool, no field docs (describe_tool has them)
    assert len(execute.description) < 5_000, len(execute.description)
    assert "read_file(args: ReadFileArgs): Promise<ReadFileResult>;" in execute.description
    assert "1-based number of the first line" not in execute.description
    assert "1-based number of the first line" in described.content[0].text
    assert quick.structured_content["value"] == "alpha\n"
    assert limited.is_error is True
    assert "time limit of 0.5 s reached" in limited.structured_content["error"]
    assert limited_s < 30  # stopped by its own limit, not the server's 60 s
    # the cap the docs state, for the output and the value alike
    assert big.structured_content["output_truncated"] is True
    assert big.structured_content["value_truncated"] is True
    assert len(big.structured_content["output"]) < RESULT_FIELD_CHARS + 200
    assert len(big.structured_content["value"]) < RESULT_FIELD_CHARS + 200
    assert len(big.structured_content["output"]) > RESULT_FIELD_CHARS - 200


def test_docs_state_the_cap_the_server_uses() -> None:
    docs = (ROOT / "docs" / "engine-host.md").read_text() + (
        ROOT / "docs" / "embedding.md"
    ).read_text()
    assert f"{RESULT_FIELD_CHARS:,}" in docs
    assert "30,000" not in docs


def _raw_initialize(home: Path, work: Path, version: str) -> tuple[dict[str, Any], float, str]:
    proc = subprocess.Popen(
        [str(INTERPRETER), "mcp-server"],
        cwd=work,
        env=cli_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"},
        },
    }
    started = time.monotonic()
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    elapsed = time.monotonic() - started
    # then the rest of the handshake and a call, served by the SDK once it has loaded
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    listed = json.loads(proc.stdout.readline())
    proc.stdin.close()
    proc.wait(timeout=60)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert listed["id"] == 2 and {t["name"] for t in listed["result"]["tools"]} >= {"execute"}
    return answer, elapsed, err.decode()


def test_initialize_is_answered_as_the_sdk_answers_it(tmp_path: Path) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for asked, expected in (
        (HANDSHAKE_PROTOCOL_VERSIONS[0], HANDSHAKE_PROTOCOL_VERSIONS[0]),
        ("1999-01-01", LATEST_HANDSHAKE_VERSION),
    ):
        answer, _, stderr = _raw_initialize(home, work, asked)
        assert answer["id"] == 1
        result = answer["result"]
        assert result["protocolVersion"] == expected
        assert result["serverInfo"]["name"] == "codemode"
        assert "tools" in result["capabilities"]
        assert "Traceback" not in stderr, stderr


def test_requests_written_before_the_input_ends_are_all_answered(tmp_path: Path) -> None:
    """A client that writes its requests and closes its end at once (a pipe) still gets
    every answer: the end of the input waits for what was asked."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "execute",
            "arguments": {"code": "await new Promise(r => setTimeout(r, 500)); return 'late'"}}},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/list"},
    ]
    done = subprocess.run(
        [str(INTERPRETER), "mcp-server"], cwd=work, env=cli_env(home),
        input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True,
        text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {1, 2, "three"}, done.stdout[:500]
    assert answers[2]["result"]["structuredContent"]["value"] == "late"
    assert "tools" in answers["three"]["result"]
