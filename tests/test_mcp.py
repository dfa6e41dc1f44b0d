"""MCP both ways, with real servers over real stdio/HTTP: configured servers' tools in
code mode and the classic dialect, crashes and timeouts, and `interpreter mcp-server`
driven by the `mcp` SDK's own client."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, cli_env, provider_flags, run_cli
from mcp_support import server_command
from runtime_support import registry_session, run_program

from codemode.config import Config, ConfigError
from codemode.js_runtime import CodeSession, ExecResult
from codemode.mcp.adapter import (
    add_configured_servers,
    normalize_schema,
    registry_name,
    schema_model,
)
from codemode.mcp.client import McpManager
from codemode.mcp.config import parse_mcp_servers
from codemode.tools import (
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    builtin_registry,
    define_tool,
)
from codemode.tools.typescript import typescript_declarations
from codemode_testkit.scripted_server import ScriptedModelServer

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "mcp_servers" / "probe_server.py"
FS_SERVER_DIR = ROOT / ".cache" / "mcp-servers"
FS_SERVER = FS_SERVER_DIR / "node_modules" / ".bin" / "mcp-server-filesystem"


def probe(**extra: Any) -> dict[str, Any]:
    # Its tools only compute: trusted to read, so calls run without asking (the default,
    # untrusted, is tested in test_mcp_trust.py).
    # Forked from one process that has imported the mcp SDK (tests/mcp_support.py).
    command, *args = server_command(PROBE)
    return {"command": command, "args": args, "trust": "read", **extra}


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[McpManager]]:
    """Managers a test opened; closed (servers stopped) when it ends."""
    opened: list[McpManager] = []
    yield opened
    for manager in opened:
        manager.close()


# How long a server the tests start may take to come up: setup, not what the tests are
# about, and a Python server importing the mcp SDK can outlast the 10 s default on a busy
# machine. (The startup timeout itself is tested with a server that never answers.)
SETUP_S = 120.0


def host(
    tmp_path: Path, opened: list[McpManager], tables: dict[str, Any], engine: str = "quickjs"
) -> tuple[CodeSession, McpManager]:
    registry = builtin_registry()
    tables = {name: {"startup_timeout_s": SETUP_S, **table} for name, table in tables.items()}
    manager, statuses = add_configured_servers(registry, tables, tmp_path / "logs")
    opened.append(manager)
    for status in statuses:
        assert status.state == "ready", status.error
    return registry_session(registry, tmp_path, engine=engine), manager


def run(session: CodeSession, code: str) -> ExecResult:
    return asyncio.run(run_program(session, code))


# --- configuration ------------------------------------------------------------------


def test_config_tables_are_validated_with_the_table_named() -> None:
    parsed = parse_mcp_servers(
        {"docs": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}}, "p": probe()}
    )
    assert parsed["docs"].transport == "http" and parsed["p"].transport == "stdio"
    assert parsed["p"].tool_timeout_s == 60 and parsed["p"].startup_timeout_s == 10
    bad = {
        "both": ({"command": "x", "url": "http://h"}, "either command"),
        "none": ({}, "either command"),
        "typo": ({"command": "x", "argz": []}, "argz"),
        "my-server": ({"command": "x"}, "server name"),
        "a__b": ({"command": "x"}, "server name"),
        "hdr": ({"command": "x", "headers": {"a": "b"}}, "headers apply to a url"),
        "neg": ({"command": "x", "tool_timeout_s": 0}, "tool_timeout_s"),
    }
    for name, (table, expected) in bad.items():
        with pytest.raises(ConfigError) as caught:
            parse_mcp_servers({name: table})
        assert f"[mcp_servers.{name}]" in str(caught.value)
        assert expected in str(caught.value)


def test_the_example_config_is_valid() -> None:
    data = tomllib.loads((ROOT / "examples" / "mcp" / "config.toml").read_text())
    config = Config.model_validate(data)
    parsed = parse_mcp_servers(config.mcp_servers)
    assert {name: s.transport for name, s in parsed.items()} == {
        "fs": "stdio",
        "time": "stdio",
        "docs": "http",
    }
    assert parsed["fs"].wants_tool("read_text_file") and not parsed["fs"].wants_tool("move_file")


def test_names_and_schemas_from_a_server_fit_every_surface() -> None:
    assert registry_name("fs", "read-file") == "mcp__fs__read_file"
    long = registry_name("server", "x" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__xxx")
    schema = normalize_schema(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Args",
            "type": "object",
            "properties": {"item": {"$ref": "#/definitions/Item"}, "odd": {"$ref": "#/x/y"}},
            "definitions": {"Item": {"title": "Item", "type": "object", "properties": {}}},
        }
    )
    assert "$schema" not in schema and "title" not in schema
    assert schema["properties"]["item"] == {"$ref": "#/$defs/Item"}
    assert schema["properties"]["odd"] == {}
    assert schema["$defs"]["Item"] == {"type": "object", "properties": {}}
    assert normalize_schema(None) == {"type": "object", "properties": {}}
    # A schema as servers write them, straight into declarations.
    registry = ToolRegistry()

    async def handler(args: Any, ctx: ToolContext) -> Any:
        return None

    args = schema_model(
        "mcp__s__t_args",
        normalize_schema(
            {
                "type": "object",
                "properties": {
                    "when": {"type": ["string", "null"], "description": "ISO date"},
                    "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                },
                "required": ["tags"],
            }
        ),
    )
    registry.add(Tool("mcp__s__t", "Do it.", args, None, handler))
    dts = typescript_declarations(registry)
    assert '  /** ISO date */\n  when?: string | null;\n  tags: ("a" | "b")[];' in dts


# --- namespaced tools in the isolate (no server needed) --------------------------------


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_namespaced_tools_are_nested_in_the_isolate(engine: str, tmp_path: Path) -> None:
    async def echo(text: str) -> dict[str, str]:
        """Echo the text."""
        return {"echo": text}

    registry = ToolRegistry([define_tool(echo, name="mcp__srv__echo")])
    registry.add(define_tool(echo, name="plain"))
    session = registry_session(registry, tmp_path, engine=engine)
    result = run(
        session,
        "const r = await tools.srv.echo({text: 'hi'});\n"
        "return [r.echo, Object.keys(tools), Object.keys(tools.srv), 'srv' in tools,"
        " 'mcp__srv__echo' in tools];",
    )
    assert result.ok, result.error
    assert result.value == ["hi", ["plain", "srv"], ["echo"], True, False]
    assert result.tool_calls[0].name == "mcp__srv__echo"
    typo = run(session, "return await tools.srv.ecko({text: 'x'})")
    assert typo.error is not None
    assert "tools.srv.ecko is not a function — did you mean tools.srv.echo?" in typo.error.message
    flat_typo = run(session, "return await tools.plian({})")
    assert flat_typo.error is not None and "did you mean tools.plain?" in flat_typo.error.message
    no_server = run(session, "return await tools.svr.echo({text: 'x'})")
    assert no_server.error is not None
    assert no_server.error.message == (
        "tools.svr.echo is not a function: there is no tools.svr — did you mean tools.srv?"
    )


def test_declarations_nest_namespaced_tools() -> None:
    async def echo(text: str) -> dict[str, str]:
        """Echo the text."""
        return {"echo": text}

    dts = typescript_declarations(ToolRegistry([define_tool(echo, name="mcp__srv__echo")]))
    assert "  srv: {\n" in dts
    assert "    echo(args: McpSrvEchoArgs): Promise<Record<string, string>>;" in dts


# --- a real server: calls, concurrency, failures ---------------------------------------


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_two_mcp_tools_run_concurrently_with_promise_all(
    engine: str, tmp_path: Path, servers: list[McpManager]
) -> None:
    session, _ = host(tmp_path, servers, {"probe": probe()}, engine)
    # meet_a and meet_b each wait for the other: they finish only if both are in flight.
    result = run(
        session,
        "const [a, b] = await Promise.all([tools.probe.meet_a({}), tools.probe.meet_b({})]);\n"
        "const sum = await tools.probe.add({a: 2, b: 3});\n"
        "return {a, b, total: sum.total};",
    )
    assert result.ok, result.error
    assert result.value == {
        "a": {"result": "a"},
        "b": {"result": "b"},
        "total": 5,
    }


def test_results_structured_plain_and_errors(tmp_path: Path, servers: list[McpManager]) -> None:
    table = probe(cwd=str(tmp_path), env={"PROBE_MARKER": "from-config"})
    session, _ = host(tmp_path, servers, {"probe": table})
    result = run(
        session,
        "const where = await tools.probe.where({});\n"
        "const plain = await tools.probe.shout({text: 'hi'});\n"
        "const waited = await tools.probe.wait_ms({ms: 1});\n"
        "let refused = null, invalid = null;\n"
        "try { await tools.probe.refuse({reason: 'no thanks'}) }"
        " catch (e) { refused = [e.name, e.message] }\n"
        "try { await tools.probe.add({a: 'x'}) } catch (e) { invalid = e.message }\n"
        "return {where, plain, waited, refused, invalid};",
    )
    assert result.ok, result.error
    value = result.value
    assert value["where"] == {"cwd": str(tmp_path), "marker": "from-config"}
    assert value["plain"] == {"content": [{"type": "text", "text": "HI"}]}
    assert value["waited"] == {"total": 1}  # `wait-ms` on the server: renamed, still called
    assert value["refused"][0] == "ToolError"
    assert value["refused"][1].startswith("tools.probe.refuse: ")
    assert value["refused"][1].endswith("no thanks")
    assert value["invalid"].startswith("tools.probe.add: ")
    assert "'b' is a required property" in value["invalid"]
    assert "'x' is not of type 'integer'" in value["invalid"]


def test_a_server_that_dies_mid_call_is_restarted_once(
    tmp_path: Path, servers: list[McpManager], capfd: pytest.CaptureFixture[str]
) -> None:
    session, _ = host(tmp_path, servers, {"probe": probe()})
    result = run(
        session,
        "const before = (await tools.probe.pid({})).total;\n"
        "let crash = null;\n"
        "try { await tools.probe.die({after_ms: 50}) }"
        " catch (e) { crash = [e instanceof ToolError, e.message] }\n"
        "const after = (await tools.probe.pid({})).total;\n"
        "return {before, crash, after};",
    )
    assert result.ok, result.error
    value = result.value
    assert value["crash"][0] is True
    assert "mcp server probe crashed during a call to die" in value["crash"][1]
    assert "probe: dying on request" in value["crash"][1]  # the stderr tail, for the model
    assert "restarted on the next call" in value["crash"][1]
    assert value["after"] != value["before"]  # a new process answered
    log = (tmp_path / "logs" / "mcp-probe.log").read_text()
    assert log.count("starting:") == 2 and "probe: dying on request" in log
    assert "dying on request" not in capfd.readouterr().err  # never on the terminal


def test_a_server_that_exits_between_calls_is_restarted_without_failing_one(
    tmp_path: Path, servers: list[McpManager]
) -> None:
    session, manager = host(tmp_path, servers, {"probe": probe()})
    first = run(
        session,
        "const p = await tools.probe.pid({});\n"
        "await tools.probe.die_soon({after_ms: 50});\n"
        "return p.total;",
    )
    assert first.ok, first.error
    # Wait (no fixed sleep) until the client has seen the connection close.
    deadline = time.monotonic() + 30
    while not manager.servers["probe"]._lost():
        assert time.monotonic() < deadline, "the exit was never noticed"
        time.sleep(0.05)
    second = run(session, "return (await tools.probe.pid({})).total")
    assert second.ok, second.error  # no call failed: the server was restarted first
    assert second.value != first.value
    assert "probe: exiting between calls" in (tmp_path / "logs" / "mcp-probe.log").read_text()
    assert manager.statuses()[0].state == "ready"


def test_a_server_that_fails_again_after_its_restart_stays_down(
    tmp_path: Path, servers: list[McpManager]
) -> None:
    session, manager = host(tmp_path, servers, {"probe": probe()})
    result = run(
        session,
        "const errors = [];\n"
        "for (const call of [() => tools.probe.die({}), () => tools.probe.die({}),"
        " () => tools.probe.pid({})]) {\n"
        "  try { await call() } catch (e) { errors.push(e.message) }\n"
        "}\n"
        "return errors;",
    )
    assert result.ok, result.error
    first, second, third = result.value
    assert "restarted on the next call" in first
    assert "again after a restart; not restarting it" in second
    assert third.startswith("mcp server probe is down: crashed during a call to die")
    assert manager.statuses()[0].state == "failed"


def test_a_call_past_tool_timeout_fails_and_the_server_comes_back(
    tmp_path: Path, servers: list[McpManager]
) -> None:
    session, _ = host(tmp_path, servers, {"probe": probe(tool_timeout_s=0.5)})
    result = run(
        session,
        "let slow = null;\n"
        "try { await tools.probe.wait_ms({ms: 20000}) } catch (e) { slow = e.message }\n"
        "return {slow, next: await tools.probe.add({a: 1, b: 1})};",
    )
    assert result.ok, result.error
    assert (
        "mcp server probe timed out after 0.5 s (tool_timeout_s) calling wait-ms"
        in (result.value["slow"])
    )
    assert result.value["next"] == {"total": 2}


def test_servers_that_cannot_start_are_reported_not_fatal(tmp_path: Path) -> None:
    registry = builtin_registry()
    # Says nothing, and exits when its stdin closes.
    silent = {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"]}
    manager, statuses = add_configured_servers(
        registry,
        {
            "missing": {"command": str(tmp_path / "no-such-server")},
            "silent": {**silent, "startup_timeout_s": 0.5},
            "off": {**probe(), "enabled": False},
        },
        tmp_path / "logs",
    )
    manager.close()
    by_name = {s.name: s for s in statuses}
    assert by_name["missing"].state == "failed"
    assert "command not found" in (by_name["missing"].error or "")
    assert by_name["silent"].state == "failed"
    assert "did not start within 0.5 s" in (by_name["silent"].error or "")
    assert by_name["off"].state == "disabled"
    assert registry.namespaces() == {}


def test_enabled_and_disabled_tools_filter_what_is_registered(
    tmp_path: Path, servers: list[McpManager]
) -> None:
    registry = builtin_registry()
    manager, _ = add_configured_servers(
        registry,
        {
            "a": probe(enabled_tools=["add", "pid", "die"], disabled_tools=["die"]),
            "b": probe(disabled_tools=["die", "refuse"]),
        },
        tmp_path / "logs",
    )
    servers.append(manager)
    spaces = registry.namespaces()
    assert sorted(spaces["a"]) == ["add", "pid"]
    assert "die" not in spaces["b"] and "refuse" not in spaces["b"] and "shout" in spaces["b"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on 127.0.0.1:{port}")


def _listening_addresses(port: int) -> list[str]:
    """IPv4 and IPv6 addresses with a listener on ``port``, from /proc/net (Linux)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                if len(address) == 8:
                    found.append(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
                else:
                    found.append("ipv6:" + address)
    return found


def test_a_server_over_streamable_http(tmp_path: Path, servers: list[McpManager]) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(PROBE), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        session, _ = host(tmp_path, servers, {"web": {"url": url, "headers": {"X-Test": "1"}}})
        result = run(session, "return (await tools.web.add({a: 20, b: 22})).total")
        assert result.ok, result.error
        assert result.value == 42
        manager = McpManager(
            parse_mcp_servers({"web": {"url": url, "env_headers": {"X-Key": "CM_NO_SUCH_VAR"}}}),
            tmp_path / "logs",
        )
        servers.append(manager)
        (status,) = manager.start_all()
        assert status.state == "failed"
        assert "environment variable CM_NO_SUCH_VAR (for header X-Key) is not set" in (
            status.error or ""
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_third_party_filesystem_server_from_npm(tmp_path: Path, servers: list[McpManager]) -> None:
    if not FS_SERVER.exists():
        log = FS_SERVER_DIR / "install.log"
        why = log.read_text()[-500:] if log.exists() else "scripts/setup-test-servers.sh not run"
        pytest.skip(f"@modelcontextprotocol/server-filesystem is not installed: {why}")
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("alpha\nbeta\n")
    (root / "src" / "b.txt").write_text("gamma\n")
    session, _ = host(tmp_path, servers, {"fs": {"command": str(FS_SERVER), "args": [str(root)]}})
    result = run(
        session,
        f"const root = {json.dumps(str(root))};\n"
        "const listing = await tools.fs.list_directory({path: root + '/src'});\n"
        "const names = listing.content.match(/[ab]\\.txt/g).sort();\n"
        "const files = await Promise.all(names.map((n) =>\n"
        "  tools.fs.read_text_file({path: `${root}/src/${n}`, head: 1})));\n"
        "await tools.fs.write_file({path: root + '/out.txt', content: 'written via mcp'});\n"
        "let outside = null;\n"
        "try { await tools.fs.read_text_file({path: '/etc/hostname'}) }"
        " catch (e) { outside = e.message }\n"
        "return {names, heads: files.map((f) => f.content), outside};",
    )
    assert result.ok, result.error
    assert result.value["names"] == ["a.txt", "b.txt"]
    assert result.value["heads"] == ["alpha", "gamma"]
    assert "access denied" in result.value["outside"].lower()
    assert (root / "out.txt").read_text() == "written via mcp"


# --- the CLI: mcp list, and exec using an MCP tool -------------------------------------


def _write_config(home: Path, tables: dict[str, dict[str, Any]]) -> None:
    lines = []
    for name, table in tables.items():
        lines.append(f"[mcp_servers.{name}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in table.items())
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def test_mcp_list_shows_state_and_tools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write_config(
        home, {"probe": probe(disabled_tools=["die"]), "gone": {"command": "/no/such/server"}}
    )
    listed = run_cli(["mcp", "list", "--json"], home=home, cwd=tmp_path)
    assert listed.code == 1  # one server failed
    servers = {s["name"]: s for s in json.loads(listed.stdout)["servers"]}
    assert servers["probe"]["state"] == "ready"
    assert {"add", "wait-ms", "die"} <= {t["name"] for t in servers["probe"]["tools"]}
    assert servers["gone"]["state"] == "failed" and "command not found" in servers["gone"]["error"]
    enabled = {t["name"]: t["enabled"] for t in servers["probe"]["tools"]}
    assert enabled["die"] is False and enabled["add"] is True
    _write_config(home, {"gone": {"command": "/no/such/server"}, "off": probe(enabled=False)})
    text = run_cli(["mcp", "list"], home=home, cwd=tmp_path)
    assert "gone  failed  stdio: /no/such/server" in text.stdout
    assert "  error: could not start: command not found: /no/such/server" in text.stdout
    assert f"off  disabled  stdio: {sys.executable}" in text.stdout


def test_run_starts_the_servers_a_script_names(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"probe": probe(), "other": probe()})
    (work / "sum.js").write_text(
        "const [sum, loud] = await Promise.all([\n"
        "  tools.probe.add({a: 40, b: 2}), tools['probe'].shout({text: 'ok'})]);\n"
        "console.log(sum.total, loud.content[0].text);\n"
        "try { await tools.probe.add({a: 'x'}) } catch (e) { console.log(e.message) }\n"
    )
    done = run_cli(["run", "sum.js", "-v"], home=home, cwd=work)
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines()[0] == "42 OK"
    assert "tools.probe.add" in done.stdout.splitlines()[1]  # a catchable, named error
    assert "tools.probe.add(" in done.stderr  # -v shows MCP calls like any other
    assert (home / "logs" / "mcp-probe.log").exists()
    assert not (home / "logs" / "mcp-other.log").exists()  # not named, not started

    # A script naming no server starts none.
    (home / "logs" / "mcp-probe.log").unlink()
    plain = run_cli(["run", "-"], home=home, cwd=work, stdin="console.log(1 + 1)")
    assert plain.code == 0 and plain.stdout == "2\n", plain.stderr
    assert not (home / "logs" / "mcp-probe.log").exists()


def test_run_reports_a_named_server_that_cannot_start(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"gone": {"command": "/no/such/server"}})
    script = "try { await tools.gone.thing({}) } catch (e) { console.log('caught:', e.message) }"
    done = run_cli(["run", "-"], home=home, cwd=work, stdin=script)
    assert done.code == 0, done.stderr
    assert "warning: mcp server gone: could not start" in done.stderr
    assert done.stdout.startswith("caught:")
    batch = run_cli(["run", "-", "--repos", str(work)], home=home, cwd=work, stdin=script)
    assert batch.code == 2
    assert "MCP servers are not started for batch runs (--repos), and the script uses gone" in (
        batch.stderr
    )


def test_servers_named_in_a_script() -> None:
    from codemode.mcp.referenced import servers_named_in

    tables = {"probe": {}, "gh": {}, "fs_2": {}}
    assert set(servers_named_in("await tools.probe.add({})", tables)) == {"probe"}
    assert set(servers_named_in("tools?.gh . list(); tools[ 'fs_2' ]", tables)) == {"gh", "fs_2"}
    assert set(servers_named_in('tools["gh"].x(); tools[`probe`]', tables)) == {"gh", "probe"}
    assert servers_named_in("mytools.probe.add(); tools.prober(); tools.ghost", tables) == {}
    assert servers_named_in("tools['gh\"]", tables) == {}  # quotes must match


def test_tools_lists_mcp_tools_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write_config(home, {"probe": probe(disabled_tools=["die"]), "gone": {"command": "/nope"}})
    listed = run_cli(["tools"], home=home, cwd=tmp_path)
    assert listed.code == 0, listed.stderr
    # Classic (the default): the names the model calls, as --json sends them.
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert {"shell", "read_file", "mcp__probe__add", "mcp__probe__wait_ms"} <= set(names)
    assert "mcp__probe__die" not in names  # disabled in the config
    assert "probe.add" not in names
    assert "warning: mcp server gone: could not start" in listed.stderr
    # Code mode: as a program calls them (tools.probe.add).
    coded = run_cli(["tools", "--code-mode"], home=home, cwd=tmp_path)
    code_names = [line.split()[0] for line in coded.stdout.splitlines()]
    assert {"shell", "probe.add", "probe.wait_ms"} <= set(code_names)
    assert "mcp__probe__add" not in code_names
    dts = run_cli(["tools", "--dts"], home=home, cwd=tmp_path)
    assert "probe: {" in dts.stdout and "add(args: McpProbeAddArgs)" in dts.stdout
    schemas = json.loads(run_cli(["tools", "--json"], home=home, cwd=tmp_path).stdout)
    add = next(t for t in schemas if t["name"] == "mcp__probe__add")
    assert add["parameters"]["required"] == ["a", "b"]
    assert [t["name"] for t in schemas] == names  # the listing is what the wire offers


def test_exec_in_code_mode_calls_an_mcp_tool(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"probe": probe()})
    program = (
        "const [sum, loud] = await Promise.all([\n"
        "  tools.probe.add({a: 40, b: 2}),\n"
        "  tools.probe.shout({text: 'done'}),\n"
        "]);\n"
        "console.log('total', sum.total, loud.content[0].text);"
    )
    script = [
        {"tool_calls": [{"name": "exec", "arguments": {"code": program}}]},
        {"text": "The total is 42."},
    ]
    with ScriptedModelServer(script) as server:
        done = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--code-mode", "--json", "add"],
            home=home,
            cwd=work,
        )
    assert done.code == 0, done.stderr
    offered = json.dumps(server.requests[0].body["tools"])
    assert "probe: {" in offered and "add(args: McpProbeAddArgs)" in offered
    assert "shout(args: McpProbeShoutArgs): Promise<CallToolResult>" in offered
    assert "total 42 DONE" in json.dumps(server.requests[1].body)
    items = [e["item"] for e in done.events() if e["type"] == "item.completed"]
    calls = [i for i in items if i["type"] == "mcp_tool_call"]
    assert {(c["server"], c["tool"], c["status"]) for c in calls} == {
        ("probe", "add", "completed"),
        ("probe", "shout", "completed"),
    }
    assert all(c["parent_id"] for c in calls)
    assert (home / "logs" / "mcp-probe.log").exists()


def test_exec_in_the_classic_dialect_calls_an_mcp_tool(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"probe": probe()})
    script = [
        {
            "tool_calls": [
                {"name": "mcp__probe__add", "arguments": {"a": 1, "b": 2}},
                {"name": "mcp__probe__shout", "arguments": {"text": "plain text"}},
            ]
        },
        {"text": "3"},
    ]
    with ScriptedModelServer(script) as server:
        done = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--classic", "add"],
            home=home,
            cwd=work,
        )
    assert done.code == 0, done.stderr
    names = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    assert "mcp__probe__add" in names and "mcp__probe__wait_ms" in names
    results = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    # structuredContent as JSON; text-only content blocks as their text
    assert [m["content"] for m in results] == ['{"total":3}', "PLAIN TEXT"]


# --- our server, driven by the SDK's client --------------------------------------------


async def _with_our_server(home: Path, cwd: Path, *args: str, body: Any) -> Any:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(INTERPRETER),
        args=["mcp-server", *args],
        cwd=cwd,
        env=cli_env(home),
    )
    with (home / "server-stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            return await body(client)


def test_our_server_lists_and_runs_execute(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("one\ntwo\n")

    async def body(client: Any) -> Any:
        listed = await client.list_tools()
        ok = await client.call_tool(
            "execute",
            {
                "code": "const f = await tools.read_file({path: 'notes.txt'});\n"
                "console.log('lines', f.total_lines);\n"
                "let refused = null;\n"
                "try { await tools.shell({command: 'touch made.txt'}) }"
                " catch (e) { refused = e.message }\n"
                "return {lines: f.content.trim().split('\\n'), refused};"
            },
        )
        failing = await client.call_tool("execute", {"code": "const x = 1;\nnull.boom;"})
        slow = await client.call_tool("execute", {"code": "while (true) {}"})
        return listed, ok, failing, slow

    # untrusted: reading is allowed, the shell would need a human, and there is none.
    listed, ok, failing, slow = asyncio.run(
        _with_our_server(
            home, work, "-c", "exec_timeout_s=1", "-c", "approval_policy=untrusted", body=body
        )
    )
    tools = {t.name: t for t in listed.tools}
    # seven tools: brief declarations fit in the description, describe_tool has the rest
    assert list(tools) == ["execute", "describe_tool"]
    assert "read_file(args: ReadFileArgs): Promise<ReadFileResult>;" in tools["execute"].description
    assert tools["execute"].input_schema["required"] == ["code"]
    assert ok.is_error is False
    assert ok.structured_content["value"]["lines"] == ["one", "two"]
    refused = ok.structured_content["value"]["refused"]
    assert "tools.shell needs approval (approval_policy is untrusted" in refused
    assert "no one is attached" in refused
    assert not (work / "made.txt").exists()
    assert ok.structured_content["output"] == "lines 2"
    assert "[return value]" in ok.content[0].text
    assert failing.is_error is True
    assert failing.structured_content["error"].startswith("TypeError at 2:")
    assert slow.is_error is True
    assert "time limit of 1 s reached" in slow.structured_content["error"]


def test_our_server_discloses_many_tools_progressively(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"probe": probe()})

    async def body(client: Any) -> Any:
        listed = await client.list_tools()
        found = await client.call_tool("search_tools", {"query": "add integers"})
        described = await client.call_tool("describe_tool", {"name": "probe.add"})
        unknown = await client.call_tool("describe_tool", {"name": "probe.ad"})
        ran = await client.call_tool(
            "execute", {"code": "return (await tools.probe.add({a: 1, b: 1})).total"}
        )
        return listed, found, described, unknown, ran

    listed, found, described, unknown, ran = asyncio.run(_with_our_server(home, work, body=body))
    names = {t.name: t for t in listed.tools}
    assert set(names) == {"execute", "search_tools", "describe_tool"}
    assert "search_tools" in names["execute"].description
    assert "interface" not in names["execute"].description
    assert found.structured_content["tools"][0]["name"] == "probe.add"
    text = described.content[0].text
    assert "probe: {" in text and "add(args: McpProbeAddArgs): Promise<McpProbeAddResult>" in text
    assert unknown.is_error and "did you mean probe.add?" in unknown.content[0].text
    assert ran.structured_content["value"] == 2


def test_our_server_reports_its_version_and_whole_first_sentences(tmp_path: Path) -> None:
    from importlib.metadata import version

    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _write_config(home, {"probe": probe()})

    async def body(client: Any) -> Any:
        found = await client.call_tool("search_tools", {"query": "lookup key table"})
        return client.server_info, found

    info, found = asyncio.run(_with_our_server(home, work, body=body))
    assert info.name == "codemode"
    assert info.version == version("codemode") != ""
    summary = found.structured_content["tools"][0]
    assert summary["name"] == "probe.lookup"
    # the first sentence whole: not cut after "e.g." or "i.e."
    assert summary["description"] == (
        'Look a key up in a small table, e.g. "alpha" or "beta", i.e. one of two known keys.'
    )


def test_summaries_skip_abbreviations() -> None:
    from codemode.mcp.server import _summary

    assert _summary("Read a file, e.g. a config. Then more.") == "Read a file, e.g. a config."
    assert _summary("Made in the U.S. today. Next.") == "Made in the U.S. today."
    assert _summary("Reads config.toml. Next.") == "Reads config.toml."
    assert _summary("Compare main vs. HEAD first. Then\nmore.") == "Compare main vs. HEAD first."
    assert _summary("Done! Really.") == "Done!"
    assert _summary("No full stop") == "No full stop"


def test_our_server_over_http_binds_loopback(tmp_path: Path) -> None:
    from mcp import Client

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    port = _free_port()
    proc = subprocess.Popen(
        [str(INTERPRETER), "mcp-server", "--http", str(port)],
        cwd=work,
        env=cli_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, proc)
        assert _listening_addresses(port) == ["127.0.0.1"]

        async def body() -> Any:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                return await client.call_tool("execute", {"code": "return 6 * 7"})

        result = asyncio.run(body())
        assert result.structured_content["value"] == 42
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- policy for calls over MCP, and import hygiene -------------------------------------


def test_policy_without_a_human() -> None:
    from codemode.mcp.approval import approving_registry, policy_decider
    from codemode.tools.builtin import builtin_registry

    builtin = builtin_registry()
    tool = builtin.get
    untrusted = policy_decider("untrusted", "workspace-write")
    assert untrusted(tool("read_file"), {}).verdict == "allow"
    # An MCP server's tools are left to the sandbox session (its trust setting decides).
    from dataclasses import replace

    mcp_tool = replace(tool("write_file"), name="mcp__fs__write", trust="untrusted")
    assert untrusted(mcp_tool, {}).verdict == "allow"
    assert untrusted(tool("shell"), {}).verdict == "prompt"
    read_only = policy_decider("never", "read-only")
    assert read_only(tool("write_file"), {}).verdict == "forbidden"
    assert read_only(tool("apply_patch"), {}).verdict == "forbidden"
    assert read_only(tool("shell"), {}).verdict == "prompt"
    assert read_only(tool("grep"), {}).verdict == "allow"
    assert policy_decider("never", "workspace-write")(tool("shell"), {}).verdict == "allow"

    async def write_file(path: str) -> str:
        return "written"

    writer = replace(define_tool(write_file), effect="write")
    guarded = approving_registry(ToolRegistry([writer]), read_only)
    ctx = ToolContext(workspace=Path("."))
    with pytest.raises(ToolError) as caught:
        asyncio.run(guarded.invoke("write_file", {"path": "x"}, ctx))
    assert str(caught.value) == (
        "tools.write_file is forbidden: sandbox_mode is read-only: write_file writes files"
    )


def test_cli_help_does_not_import_the_mcp_sdk(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import codemode.cli\n"
        "for argv in (['--help'], ['mcp', '--help'], ['mcp-server', '--help']):\n"
        "    try:\n"
        "        codemode.cli.main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = {'mcp', 'mcp_types', 'anyio', 'jsonschema', 'uvicorn', 'starlette'}\n"
        "print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "mcp-server" in proc.stdout and "HEAVY []\n" in proc.stdout, proc.stdout


def test_a_bad_mcp_table_is_a_usage_error_everywhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _write_config(home, {"x": {"command": "a", "url": "http://b"}})
    expected = "[mcp_servers.x]: set either command (stdio) or url (streamable HTTP), not both"
    with ScriptedModelServer([{"text": "unused"}]) as server:
        runs = [
            run_cli(
                ["exec", *provider_flags(server.base_url, "chat"), "hi"], home=home, cwd=tmp_path
            ),
            run_cli(["mcp", "list"], home=home, cwd=tmp_path),
            run_cli(["mcp-server"], home=home, cwd=tmp_path),
            run_cli(["tools"], home=home, cwd=tmp_path),
            run_cli(["run", "-"], home=home, cwd=tmp_path, stdin="await tools.x.y()"),
        ]
    for done in runs:
        assert done.code == 2 and expected in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_our_server_applies_the_execpolicy_and_confinement(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    outside = tmp_path / "outside.txt"

    async def body(client: Any) -> Any:
        return await client.call_tool(
            "execute",
            {
                "code": "let refused = null;\n"
                "try { await tools.shell({command: 'git reset --hard'}) }"
                " catch (e) { refused = e.message }\n"
                f"const w = await tools.shell({{command: 'echo x > {outside}'}});\n"
                "return {refused, exit: w.exit_code};"
            },
        )

    result = asyncio.run(_with_our_server(home, work, body=body))
    value = result.structured_content["value"]
    assert "discards uncommitted changes" in value["refused"]  # prompt, and nobody to ask
    assert value["exit"] != 0 and not outside.exists()  # confined to the workspace
