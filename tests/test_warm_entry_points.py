"""Each entry point through the warm path and the cold path, compared: output, exit
status, what a command run by a program sees (environment, folder, umask, limits),
stdin programs. The warm run is checked to be the server's (its count of runs). These
fail without ``codemode.warm`` (no server; the console script is ``codemode.cli``)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest
from agent_support import provider_flags
from warm_support import INTERPRETER, real_server, served, warm_env

from codemode_testkit.scripted_server import ScriptedModelServer


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("warm")
    env = warm_env(tmp)
    with real_server(env, tmp / "server.log") as sock:
        yield env, sock, tmp


def _both(warm, args: list[str], stdin: bytes = b"", cwd: Path | None = None,
          **extra: str) -> tuple[subprocess.CompletedProcess[bytes], ...]:  # fmt: skip
    env, sock, tmp = warm
    runs = []
    for mode in ("0", "1"):
        before = served(sock)
        done = subprocess.run([INTERPRETER, *args], env=dict(env, CODEMODE_WARM=mode, **extra),
                              input=stdin, capture_output=True, timeout=120,
                              cwd=cwd or tmp)  # fmt: skip
        assert served(sock) - before == (1 if mode == "1" else 0), (mode, done)
        runs.append(done)
    return tuple(runs)


Done = subprocess.CompletedProcess[bytes]


def _same(cold: Done, warm: Done) -> None:
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        cold.returncode, cold.stdout, cold.stderr)  # fmt: skip


def test_run_a_script_and_a_failing_one(warm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "hello.js").write_text('console.log("hello"); return 42;\n')
    (tmp_path / "bad.js").write_text('throw new Error("broken on purpose");\n')
    _same(*_both(warm, ["run", "hello.js"], cwd=tmp_path))
    cold, hot = _both(warm, ["run", "bad.js"], cwd=tmp_path)
    _same(cold, hot)
    assert cold.returncode != 0 and b"broken on purpose" in cold.stderr


def test_run_a_program_on_stdin(warm) -> None:  # type: ignore[no-untyped-def]
    cold, hot = _both(warm, ["run", "-"], stdin=b'console.log("from stdin")\n')
    _same(cold, hot)
    assert cold.stdout == b"from stdin\n"


def test_a_command_a_program_runs_sees_the_callers_environment_and_folder(
    warm, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    (tmp_path / "env.js").write_text(
        "const r = await tools.shell({command: 'echo $ONLY_THE_CALLERS; pwd; umask; ulimit -n'});\n"
        "console.log(r.output);\n"
    )
    cold, hot = _both(warm, ["run", "env.js"], cwd=tmp_path, ONLY_THE_CALLERS="yes-mine")
    _same(cold, hot)
    assert cold.stdout.startswith(f"yes-mine\n{tmp_path}\n".encode()), cold


def test_listings_and_policy(warm) -> None:  # type: ignore[no-untyped-def]
    for args in (["tools"], ["policy", "check", "--", "rm", "-rf", "/"], ["providers"],
                 ["harness", "list"], ["run", "--help"], ["no-such-option-run", "x"]):  # fmt: skip
        if args[0] == "no-such-option-run":
            args = ["run", "--no-such-option"]
        _same(*_both(warm, args))


def test_mcp_server_answers_initialize(warm) -> None:  # type: ignore[no-untyped-def]
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n"  # fmt: skip
    cold, hot = _both(warm, ["mcp-server"], stdin=hello)
    assert cold.returncode == hot.returncode == 0
    assert json.loads(hot.stdout.splitlines()[0]) == json.loads(cold.stdout.splitlines()[0])


def test_acp_answers_initialize(warm) -> None:  # type: ignore[no-untyped-def]
    hello = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": 1}}).encode() + b"\n"  # fmt: skip
    cold, hot = _both(warm, ["acp"], stdin=hello)
    assert cold.returncode == hot.returncode
    assert json.loads(hot.stdout.splitlines()[0]) == json.loads(cold.stdout.splitlines()[0])


def test_exec_a_turn_against_a_scripted_model(warm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code = "const r = await tools.shell({command: 'echo $ONLY_THE_CALLERS'}); return r.output"
    script = [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]},
              {"text": "all done"}]  # fmt: skip
    outs = []
    for _ in range(2):
        with ScriptedModelServer(script + script) as server:
            outs.append(_both(warm, ["exec", *provider_flags(server.base_url, "chat"),
                                     "--code-mode", "go"], cwd=tmp_path,
                              ONLY_THE_CALLERS="callers"))  # fmt: skip
    for cold, hot in outs:
        assert cold.returncode == hot.returncode == 0, (cold.stderr, hot.stderr)
        assert cold.stdout == hot.stdout
        assert b"all done" in hot.stdout


def test_the_interactive_session_and_resume_start_cold(warm) -> None:  # type: ignore[no-untyped-def]
    env, sock, _ = warm
    before = served(sock)
    for args in (["--help"], ["resume", "--help"], ["-m", "x", "--help"]):
        done = subprocess.run([INTERPRETER, *args], env=env, capture_output=True,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, done
    assert served(sock) == before


def test_code_mode_host_answers_hello(warm) -> None:  # type: ignore[no-untyped-def]
    hello = json.dumps({
        "type": "connection/hello", "supportedVersions": [1],
        "requiredCapabilities": [], "optionalCapabilities": [],
    }).encode()  # fmt: skip
    cold, hot = _both(warm, ["code-mode-host"], stdin=struct.pack("<I", len(hello)) + hello)
    assert cold.returncode == hot.returncode
    first = []
    for done in (cold, hot):
        (length,) = struct.unpack_from("<I", done.stdout)
        first.append(json.loads(done.stdout[4 : 4 + length]))
    assert first[0] == first[1] and first[0]["type"] == "connection/ready"
