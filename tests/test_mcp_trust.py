"""One source of sandbox settings, and MCP tools under the same mode and approval
decisions as built-in tools, in every entry point.

A real decoy MCP server (tests/mcp_servers/decoy_server.py) writes wherever it is told;
the tests check whether a call reaches it, from ``run``, ``exec``, ``mcp-server``, ACP
and an embedder's ``ToolHost``, by the server's ``trust`` and the session's settings
taken from the config file and overridden by flags."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env, provider_flags, run_cli
from mcp_support import server_command

from codemode_testkit.scripted_server import ScriptedModelServer

DECOY = Path(__file__).resolve().parent / "mcp_servers" / "decoy_server.py"


def write_config(home: Path, top: dict[str, Any], trust: str | None = None, **tables: Any) -> None:
    lines = [f"{key} = {json.dumps(value)}" for key, value in top.items()]
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in table.items())
    lines.append("[mcp_servers.decoy]")
    command, *args = server_command(DECOY)
    lines.append(f"command = {json.dumps(command)}")
    lines.append(f"args = {json.dumps(args)}")
    if trust is not None:
        lines.append(f"trust = {json.dumps(trust)}")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for d in (home, work, outside):
        d.mkdir()
    return home, work, outside


SCRIPT = """
const out = {}
try { out.decoy = await tools.decoy.plant({path: argv[0], text: 'pwned'}) }
catch (e) { out.decoy = e.message }
try { out.builtin = (await tools.write_file({path: 'w.txt', content: 'x'})).path }
catch (e) { out.builtin = e.message }
return out
"""


def run_script(work: Path, home: Path, target: Path, *flags: str) -> dict[str, str]:
    (work / "s.js").write_text(SCRIPT)
    done = run_cli(["run", "--json", *flags, "s.js", str(target)], home=home, cwd=work)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)["value"]


# (sandbox_mode, approval_policy, server trust) -> does the call reach the server?
CASES = [
    ("read-only", "on-request", None, False),
    ("read-only", "never", None, False),
    ("read-only", "never", "write", False),
    ("read-only", "untrusted", "read", True),
    ("workspace-write", "on-request", None, False),  # asked; no one to ask in `run`
    ("workspace-write", "never", None, True),
    ("workspace-write", "on-request", "write", True),
    ("workspace-write", "untrusted", "write", False),
    ("workspace-write", "untrusted", "read", True),
]


@pytest.mark.parametrize(("mode", "policy", "trust", "reaches"), CASES)
def test_run_decides_mcp_calls_from_config_and_trust(
    dirs: tuple[Path, Path, Path], mode: str, policy: str, trust: str | None, reaches: bool
) -> None:
    home, work, outside = dirs
    # The settings come from the config file alone: no flags.
    write_config(home, {"sandbox_mode": mode, "approval_policy": policy}, trust)
    target = outside / "planted.txt"
    out = run_script(work, home, target)
    assert target.exists() == reaches, out
    if not reaches:
        assert "tools.decoy.plant" in out["decoy"]
        assert ("read-only" in out["decoy"]) == (mode == "read-only")
        assert "needs approval" in out["decoy"] or "refused" in out["decoy"]
    if mode == "read-only":
        assert "read-only" in out["builtin"] and not (work / "w.txt").exists()


def test_flags_override_the_config(dirs: tuple[Path, Path, Path]) -> None:
    home, work, outside = dirs
    write_config(home, {"sandbox_mode": "read-only", "approval_policy": "untrusted"})
    target = outside / "planted.txt"
    out = run_script(work, home, target, "--sandbox", "workspace-write", "--approval", "never")
    assert out == {"decoy": {"result": "planted"}, "builtin": "w.txt"} and target.exists()
    target.unlink()
    # And -c overrides the file, before or after the command name.
    write_config(home, {})
    (work / "s.js").write_text(SCRIPT)
    done = run_cli(
        ["-c", "sandbox_mode=read-only", "run", "--json", "s.js", str(target)], home=home, cwd=work
    )
    assert "read-only" in json.loads(done.stdout)["value"]["decoy"] and not target.exists()


def test_run_honours_the_sandbox_table(dirs: tuple[Path, Path, Path]) -> None:
    from codemode.sandbox.confinement.confine import probe

    found = probe()  # each field is why that backend cannot run here, None if it can
    if found.bubblewrap is not None and found.landlock is not None:
        pytest.skip(f"no confinement backend works here: {found.bubblewrap}; {found.landlock}")
    home, work, _ = dirs
    write_config(
        home,
        {"sandbox_mode": "read-only", "approval_policy": "never"},
        sandbox={"env_denylist": ["DATABASE_*"]},
    )
    (work / "s.js").write_text(
        "const r = await tools.shell({command: 'echo \"[$DATABASE_URL]\"; touch made.txt'})\n"
        "return r.output"
    )
    done = run_cli(["run", "--json", "s.js"], home=home, cwd=work, DATABASE_URL="postgres://secret")
    assert done.code == 0, done.stderr
    output = json.loads(done.stdout)["value"]
    assert "[]" in output and "secret" not in output
    assert not (work / "made.txt").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "s.js"],
        ["run", "s.js", "--repos", "."],
        ["exec", "hi"],
        ["mcp-server"],
        ["acp"],
        [],  # the interactive session (stdin is not a terminal)
    ],
)
@pytest.mark.parametrize(
    "bad", ["sandbox_mode=bogus", "approval_policy=sometimes", "sandbox.env_denylist=3"]
)
def test_an_invalid_setting_is_a_usage_error_everywhere(
    dirs: tuple[Path, Path, Path], args: list[str], bad: str
) -> None:
    home, work, _ = dirs
    (work / "s.js").write_text("return 1")
    done = run_cli([*args[:1], "-c", bad, *args[1:]], home=home, cwd=work, timeout=30)
    assert done.code == 2, (done.stdout, done.stderr)
    assert bad.split("=")[0].split(".")[-1] in done.stderr
    assert "Traceback" not in done.stderr


def test_exec_refuses_an_untrusted_server_in_read_only(dirs: tuple[Path, Path, Path]) -> None:
    home, work, outside = dirs
    write_config(home, {"sandbox_mode": "read-only"})
    target = outside / "planted.txt"
    script = [
        {
            "tool_calls": [
                {"name": "mcp__decoy__plant", "arguments": {"path": str(target), "text": "x"}}
            ]
        },
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        done = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--classic", "go"],
            home=home,
            cwd=work,
        )
    assert done.code == 0, done.stderr
    assert not target.exists()
    results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert "read-only" in results[0]["content"] and "decoy" in results[0]["content"]


def test_mcp_server_entry_point_applies_trust(dirs: tuple[Path, Path, Path]) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home, work, outside = dirs
    write_config(home, {})  # workspace-write, on-request, decoy untrusted
    target = outside / "planted.txt"

    async def go() -> Any:
        params = StdioServerParameters(
            command=str(INTERPRETER), args=["mcp-server"], cwd=work, env=cli_env(home)
        )
        with (home / "err.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                code = (
                    f"try {{ return await tools.decoy.plant({{path: {json.dumps(str(target))},"
                    " text: 'x'}) } catch (e) { return e.message }"
                )
                return await client.call_tool("execute", {"code": code})

    result = asyncio.run(go())
    assert "needs approval" in result.structured_content["value"]
    assert not target.exists()


def test_tool_host_given_settings_applies_trust(tmp_path: Path) -> None:
    from codemode.host import ToolHost
    from codemode.mcp.referenced import add_servers
    from codemode.tools.builtin import builtin_registry

    target = tmp_path / "planted.txt"
    command, *args = server_command(DECOY)
    tables = {"decoy": {"command": command, "args": args}}
    notices: list[str] = []
    registry = add_servers(builtin_registry(), tables, tmp_path / "logs", notices)
    code = (
        f"try {{ return await tools.decoy.plant({{path: {json.dumps(str(target))}, text: 'x'}}) }}"
        " catch (e) { return e.message }"
    )
    try:
        for settings, reaches in (
            ({"sandbox_mode": "read-only", "approval_policy": "never"}, False),
            ({"sandbox_mode": "workspace-write", "approval_policy": "never"}, True),
        ):
            host = ToolHost(tmp_path, registry=registry, sandbox=settings)
            result = asyncio.run(host.execute(code))
            assert target.exists() == reaches, result.value
        with pytest.raises(ValueError, match="sandbox_mode"):
            ToolHost(tmp_path, sandbox={"sandbox_mode": "bogus"})
    finally:
        registry.close()


def test_acp_session_applies_trust(dirs: tuple[Path, Path, Path]) -> None:
    """An editor session (ACP): an untrusted server's call is put to the editor as a
    permission request; refusing it keeps the decoy from running."""
    home, work, outside = dirs
    write_config(home, {})
    target = outside / "planted.txt"
    script = [
        {
            "tool_calls": [
                {"name": "mcp__decoy__plant", "arguments": {"path": str(target), "text": "x"}}
            ]
        },
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        proc = subprocess.Popen(
            [str(INTERPRETER), "acp", "--classic", *provider_flags(server.base_url, "chat")],
            cwd=work,
            env=cli_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        asked: list[dict[str, Any]] = []
        try:
            assert proc.stdin is not None and proc.stdout is not None

            def send(msg: dict[str, Any]) -> None:
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", **msg}) + "\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]

            def until(msg_id: int) -> dict[str, Any]:
                while True:
                    line = proc.stdout.readline()  # type: ignore[union-attr]
                    assert line, "the agent exited"
                    msg = json.loads(line)
                    if msg.get("method") == "session/request_permission":
                        asked.append(msg["params"])
                        options = msg["params"]["options"]
                        reject = next(o for o in options if o["kind"].startswith("reject"))
                        send(
                            {
                                "id": msg["id"],
                                "result": {
                                    "outcome": {
                                        "outcome": "selected",
                                        "optionId": reject["optionId"],
                                    }
                                },
                            }
                        )
                    elif msg.get("id") == msg_id and "method" not in msg:
                        return msg

            send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            until(1)
            send({"id": 2, "method": "session/new", "params": {"cwd": str(work), "mcpServers": []}})
            session_id = until(2)["result"]["sessionId"]
            send(
                {
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]},
                }
            )
            until(3)
        finally:
            proc.kill()
            proc.wait(timeout=10)
    assert asked, "the editor was never asked"
    assert not target.exists()
    assert os.environ.get("CODEMODE_TEST_NEVER_SET") is None


def test_interactive_session_asks_before_an_untrusted_server(
    dirs: tuple[Path, Path, Path],
) -> None:
    """In a real terminal: the call is put to the user; "deny" keeps the decoy idle,
    "approve once" lets the next call through."""
    import pexpect

    home, work, outside = dirs
    write_config(home, {})  # workspace-write, on-request; the decoy has no trust
    denied, allowed = outside / "denied.txt", outside / "allowed.txt"

    def plant(target: Path) -> dict[str, Any]:
        args = {"path": str(target), "text": "x"}
        return {"tool_calls": [{"name": "mcp__decoy__plant", "arguments": args}]}

    script = [plant(denied), {"text": "It was refused."}, plant(allowed), {"text": "Planted."}]
    with ScriptedModelServer(script) as server:
        env = cli_env(home, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
        child = pexpect.spawn(
            str(INTERPRETER),
            [*provider_flags(server.base_url, "chat"), "--classic"],
            cwd=str(work),
            env=env,
            encoding="utf-8",
            codec_errors="replace",
            dimensions=(50, 120),
            timeout=60,
        )
        try:
            child.expect("›")
            child.send("plant it\r")
            child.expect("approval needed")
            child.expect("tools.decoy.plant")
            child.expect(r"\[n\]")
            child.send("n")
            child.expect("It was refused.")
            child.expect("›")
            child.send("again\r")
            child.expect("approval needed")
            child.expect(r"\[y\]")
            child.send("y")
            child.expect("Planted.")
        finally:
            child.terminate(force=True)
    assert not denied.exists()
    assert allowed.read_text() == "x"
