"""One hook, every entry point that runs programs: a PreToolUse hook sees the cell a
nested call came from and the call's place in its program, the same way whether the
program came from `interpreter run`, a batch run (``--repos``), ``ToolHost``,
``mcp-server`` (the official MCP client) or an agent session. (The Codex code-mode host
runs no hooks: Codex's own CLI runs them on its side.)"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env, run_cli
from hooks_support import PYTHON, hooks_table, logged, run_session, script, write_hooks

from codemode.hooks.loading import program_hooks
from codemode.host import ToolHost

PROGRAM = (
    "const a = await tools.shell({command: 'echo one'});"
    " const b = await tools.shell({command: 'echo two'});"
    " return a.output.trim() + b.output.trim()"
)
ENTRY_POINTS = ["run", "batch", "toolhost", "mcp-server", "exec"]


def _recorder(tmp_path: Path, log: Path) -> str:
    body = (
        "import json, sys\n"
        "data = json.load(sys.stdin)\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(data) + '\\n')\n"
    )
    return f"{PYTHON} {script(tmp_path, 'record.py', body)}"


def _run(home: Path, work: Path, tmp_path: Path) -> Any:
    (tmp_path / "p.js").write_text(PROGRAM)
    out = run_cli(["run", "--json", str(tmp_path / "p.js")], home=home, cwd=work)
    assert out.code == 0, out.stderr
    return json.loads(out.stdout)["value"]


def _batch(home: Path, work: Path, tmp_path: Path) -> Any:
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    (tmp_path / "p.js").write_text(PROGRAM)
    report = tmp_path / "report.jsonl"
    out = run_cli(["run", str(tmp_path / "p.js"), "--report", str(report), "--repos", str(work)],
                  home=home, cwd=tmp_path, timeout=120)  # fmt: skip
    assert out.code == 0, out.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    return next(r["value"] for r in rows if r.get("value"))


def _toolhost(home: Path, work: Path, tmp_path: Path) -> Any:
    engine = program_hooks(work).engine
    assert engine is not None

    async def go() -> Any:
        async with ToolHost(work, hooks=engine) as host:
            return (await host.execute(PROGRAM)).value

    return asyncio.run(go())


def _mcp_server(home: Path, work: Path, tmp_path: Path) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(INTERPRETER), args=["mcp-server"], cwd=work, env=cli_env(home)
    )

    async def go() -> Any:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                result = await client.call_tool("execute", {"code": PROGRAM})
        return result.structured_content["value"]

    return asyncio.run(go())


def _exec(home: Path, work: Path, tmp_path: Path) -> Any:
    call = {"name": "exec", "id": "call_p", "arguments": {"code": PROGRAM}}
    replies = [{"tool_calls": [call]}, {"text": "done"}]
    run = run_session(home, work, replies)
    items = run.items("code_execution")
    assert items, run.events
    return items[-1]["value"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_hook_sees_the_cell_and_place_of_every_nested_call(
    entry: str, home: Path, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    log = tmp_path / "hook.jsonl"
    write_hooks(home / "hooks.json", hooks_table("PreToolUse", _recorder(tmp_path, log), "Bash"))
    runner = {"run": _run, "batch": _batch, "toolhost": _toolhost,
              "mcp-server": _mcp_server, "exec": _exec}[entry]  # fmt: skip
    value = runner(home, work, tmp_path)
    assert value == "onetwo", value
    seen = [d for d in logged(log) if d["hook_event_name"] == "PreToolUse"]
    assert [d["tool_input"]["command"] for d in seen] == ["echo one", "echo two"], seen
    # Both calls name the same cell, and their place in it.
    cells = {d.get("cell_id") for d in seen}
    assert len(cells) == 1 and None not in cells, seen
    assert [d.get("sequence") for d in seen] == [1, 2], seen
    if entry == "exec":
        assert all(d["exec_call_id"] == "call_p" for d in seen), seen
