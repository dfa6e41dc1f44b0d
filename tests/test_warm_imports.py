"""A warm run imports nothing: every module an entry point needs is imported by the warm
server before it forks (``codemode.launch.serve._prepare``), so no run pays for an
import; nor does it parse the built-in command rules (the server judged a command line
with them) or probe bubblewrap where the server found it works. Each entry point runs
here in a process prepared as the server prepares itself, which then lists the modules
the command imported; the list must be empty (a library that imports a module only on
first use, such as httpx its transport, shows up here).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_support import provider_flags

from codemode.sandbox.confinement import bwrap
from codemode_testkit.scripted_server import ScriptedModelServer

# The warm server's preparation, then the command as a warm run runs it (``codemode.cli.
# main``), then what it imported, on a line of its own on stderr.
PREPARED = """
import json, os, sys
from codemode.launch.serve import _prepare
_prepare()
from codemode.sandbox.execpolicy import policy
parsed = []  # rules files parsed by the run: the built-in ones were parsed by the server
real_parse = policy.parse_rules
policy.parse_rules = lambda text, source, *rest: (parsed.append(source),
                                                  real_parse(text, source, *rest))[1]
from codemode.sandbox.confinement import bwrap
# bubblewrap probed by the run (the server's verdict, where it works, serves it)
probed, real_probe = [], bwrap._probe
bwrap._probe = lambda: (probed.append(1), real_probe())[1]
before = set(sys.modules)
from codemode.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
os.write(2, ("PARSED " + json.dumps(parsed) + "\\n").encode())
os.write(2, ("PROBED " + json.dumps(len(probed)) + "\\n").encode())
os.write(2, ("IMPORTED " + json.dumps(sorted(set(sys.modules) - before)) + "\\n").encode())
"""


def _imported(args: list[str], cwd: Path, stdin: bytes = b"") -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-c", PREPARED, *args], cwd=cwd, input=stdin,
                          capture_output=True, timeout=180)  # fmt: skip
    err = done.stderr.decode(errors="replace")
    lines = [line for line in err.splitlines() if line.startswith("IMPORTED ")]
    assert lines, err[-3000:]
    parsed = [line for line in err.splitlines() if line.startswith("PARSED ")]
    assert json.loads(parsed[-1].removeprefix("PARSED ")) == [], "a run parsed rules again"
    probed = [line for line in err.splitlines() if line.startswith("PROBED ")]
    if bwrap.available() is None:  # bubblewrap works here: the server found so
        assert json.loads(probed[-1].removeprefix("PROBED ")) == 0, "a run probed it again"
    return json.loads(lines[-1].removeprefix("IMPORTED ")), done.stdout.decode()


def test_run_imports_nothing(tmp_path: Path) -> None:
    program = 'console.log("hi " + (await tools.shell({command: "echo x"})).output)\n'
    (tmp_path / "hello.js").write_text(program)
    imported, out = _imported(["run", "--full-auto", "hello.js"], tmp_path)
    assert "hi x" in out
    assert imported == []


def test_exec_in_code_mode_imports_nothing(tmp_path: Path) -> None:
    program = 'const r = await tools.shell({command: "echo called"}); console.log(r.output);'
    script = [
        {"tool_calls": [{"name": "exec", "freeform": True, "arguments": program}]},
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        imported, out = _imported(
            ["exec", "--code-mode", "--full-auto", "-C", str(tmp_path),
             *provider_flags(server.base_url, "responses"), "run it"],
            tmp_path,
        )  # fmt: skip
        assert len(server.requests) == 2
    assert "done" in out
    assert imported == []


def _line(message: dict[str, object]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def test_mcp_server_imports_nothing(tmp_path: Path) -> None:
    code = 'return (await tools.shell({command: "echo served"})).output'
    stdin = b"".join([
        _line({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        _line({"method": "notifications/initialized"}),
        _line({"id": 2, "method": "tools/list"}),
        _line({"id": 3, "method": "tools/call",
               "params": {"name": "execute", "arguments": {"code": code}}}),
    ])  # fmt: skip
    imported, out = _imported(["mcp-server", "--full-auto"], tmp_path, stdin)
    answers = {m["id"]: m for m in map(json.loads, out.splitlines())}
    assert "served" in json.dumps(answers[3]["result"])
    assert imported == []
