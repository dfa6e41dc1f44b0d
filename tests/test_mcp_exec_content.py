"""`exec --json` reports an MCP call's result as Codex does: the server's own content
blocks (text, image, resource...) next to its structuredContent, not a re-encoding of
what the program got back. The real probe server over stdio; the scripted model server
drives `interpreter exec --json` in both dialects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import provider_flags, run_cli
from mcp_support import server_command

from codemode_testkit.scripted_server import ScriptedModelServer

PROBE = Path(__file__).resolve().parent / "mcp_servers" / "probe_server.py"


def _config(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    command, *args = server_command(PROBE)  # forked: tests/mcp_support.py
    (home / "config.toml").write_text(
        "[mcp_servers.probe]\n"
        f"command = {json.dumps(command)}\n"
        f"args = {json.dumps(args)}\n"
        'trust = "read"\n'
    )


def _mcp_items(tmp_path: Path, dialect: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _config(home)
    script = [{"tool_calls": calls}, {"text": "done"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), dialect, "--json", "go"],
            home=home, cwd=work,
        )
    assert run.code == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    done = [e["item"] for e in events if e["type"] == "item.completed"]
    return {i["tool"]: i for i in done if i["type"] == "mcp_tool_call"}


def _check(items: dict[str, Any]) -> None:
    picture, add, shout = items["picture"], items["add"], items["shout"]
    blocks = picture["result"]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "resource"]
    assert blocks[0]["text"] == "a picture of cat"
    assert blocks[1]["mimeType"] == "image/png" and blocks[1]["data"].startswith("iVBOR")
    assert blocks[2]["resource"] == {"uri": "probe://cat", "text": "caption"}
    assert picture["result"]["structured_content"] == {"label": "cat", "pixels": 1}
    # The server's own text block for a structured result, and no structuredContent
    # where it sent none.
    assert add["result"]["structured_content"] == {"total": 5}
    assert [b["type"] for b in add["result"]["content"]] == ["text"]
    assert shout["result"] == {"content": [{"type": "text", "text": "HI"}],
                               "structured_content": None}
    for item in items.values():  # what goes out is Codex's item, nothing left over
        assert "structured_content" not in item and "content" not in item


@pytest.mark.parametrize("dialect", ["--classic", "--code-mode"])
def test_exec_json_carries_the_servers_content_blocks(tmp_path: Path, dialect: str) -> None:
    if dialect == "--classic":
        calls = [
            {"name": "mcp__probe__picture", "arguments": {"label": "cat"}},
            {"name": "mcp__probe__add", "arguments": {"a": 2, "b": 3}},
            {"name": "mcp__probe__shout", "arguments": {"text": "hi"}},
        ]
    else:
        program = (
            "const p = await tools.probe.picture({label: 'cat'});\n"
            "await tools.probe.add({a: 2, b: 3}); await tools.probe.shout({text: 'hi'});\n"
            "console.log(p.label, p.pixels);"
        )
        calls = [{"name": "exec", "arguments": {"code": program}}]
    _check(_mcp_items(tmp_path, dialect, calls))
