"""The real Codex CLI with our code-mode host beside its binary, against the scripted
model server: the same turn with Codex's own host and with ours must give the model the
same tool outputs and make Codex report the same items (timings and random ids aside).

Codex 0.169 starts the host with ``--listen grpc+stdio://`` (gRPC over its stdio);
Codex 0.148 with no arguments (the framed stdio protocol). Skipped, saying why, when
the Codex build is not cached (scripts/setup-test-servers.sh fetches both)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.codex_host.warm.beside import warm_words
from codemode.warm.place import serving
from tests.codex_cli_support import (
    INTERPRETER,
    Step,
    Turn,
    app_server,
    cell_of,
    codex_vendor,
    exec_call,
    installed_codex,
    newest_codex_version,
    normalized,
    output_text,
    reported_items,
    run_turn,
    tool_outputs,
    wait_call,
    with_our_host,
)
from tests.codex_host_support import free_port, short_private_folder, wait_port

# A 1x1 PNG: Codex checks that an image decodes.
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
PATCH = "*** Begin Patch\\n*** Add File: hello.txt\\n+hello from the patch\\n*** End Patch\\n"

TOOLS = f"""const one = await tools.exec_command({{cmd: "echo first-call", login: false}});
text(one.output);
const patched = await tools.apply_patch("{PATCH}");
text(patched);
const many = await Promise.all(Array.from({{length: 12}}, (_, i) =>
  tools.exec_command({{cmd: `echo call-${{i}}`, login: false}})));
text(many.map((r) => r.output.trim()).join(","));
image("{PNG}");
notify("halfway there");
store("answer", {{value: 42}});
"""
# The pragma's max_output_tokens reaches the host in the request; Codex cuts the output.
LOAD = (
    '// @exec: {"max_output_tokens": 60}\n'
    'text(load("answer").value);\ntext(String(load("nothing")));\n'
    'text("a".repeat(1000) + "b".repeat(1000));\n'
)
YIELDS = (
    'text("before yield");\nyield_control();\n'
    "await new Promise((r) => setTimeout(r, 1500));\n"
    'text("after yield");\n'
)
# No yield_control(): the pragma's yield time (in the request) hands control back.
SPINS = (
    '// @exec: {"yield_time_ms": 1500}\n'
    'text("spinning");\n'
    "while (true) { await new Promise((r) => setTimeout(r, 50)); }\n"
)
THROWS = 'text("about to fail");\nthrow new Error("boom-42");\n'
TOOL_FAILS = (
    "try {\n  await tools.exec_command({});\n} catch (e) {\n"
    "  text(`exec_command failed: ${typeof e}: ${String(e)}`);\n}\n"
)


def steps() -> list[Step]:
    return [
        exec_call(TOOLS),
        exec_call(LOAD),
        exec_call(YIELDS),
        lambda out: wait_call(cell_of(out)),
        exec_call(SPINS),
        lambda out: wait_call(cell_of(out), terminate=True),
        exec_call(THROWS),
        exec_call(TOOL_FAILS),
    ]


NOTE = "halfway there"


def check_turn(turn: Turn) -> None:
    """What the turn must show whichever host ran it (the notification included: Codex
    0.148 drops one that reaches it after the host said its cell is closed)."""
    assert turn.rc == 0, turn.stderr[-2000:]
    texts = [output_text(o) for o in turn.outputs]
    assert len(texts) == 9, json.dumps(turn.outputs)[:3000]  # 8 calls + 1 notification
    tools_out = texts[0]
    assert tools_out.startswith("Script completed")
    assert "first-call" in tools_out
    assert ",".join(f"call-{i}" for i in range(12)) in tools_out
    assert any(
        isinstance(o, list) and any(p.get("type") == "input_image" for p in o) for o in turn.outputs
    )
    assert NOTE in texts
    assert (turn.workspace / "hello.txt").read_text() == "hello from the patch\n"
    rest = [t for t in texts if t != NOTE]
    assert "42" in rest[1] and "undefined" in rest[1]
    assert "tokens truncated" in rest[1] and "aaaa" in rest[1] and "bbbb" in rest[1]
    assert rest[2].startswith("Script running with cell ID") and "before yield" in rest[2]
    assert rest[3].startswith("Script completed") and "after yield" in rest[3]
    assert rest[4].startswith("Script running") and "spinning" in rest[4]
    assert rest[5].startswith("Script terminated")
    assert rest[6].startswith("Script failed") and "about to fail" in rest[6]
    assert "Error: boom-42\n    at exec_main.mjs:2:" in rest[6]
    assert "exec_command failed: " in rest[7]


def compare(ours: Turn, theirs: Turn) -> None:
    def calls(turn: Turn) -> list[Any]:
        return [o for o in turn.outputs if o != NOTE]

    assert normalized(calls(ours)) == normalized(calls(theirs))
    assert reported_items(ours) == reported_items(theirs)


_baseline: dict[tuple[str, tuple[str, ...]], Turn] = {}
# Codex 0.171 speaks the framed protocol to its host when gRPC is turned off.
FRAMED = ("--disable", "code_mode_host_grpc")


def baseline(version: str, codex_args: tuple[str, ...] = ()) -> Turn:
    """The turn with Codex's own host (once per version and arguments per test run)."""
    key = (version, codex_args)
    if key not in _baseline:
        turn = run_turn(codex_vendor(version), steps(), codex_args=codex_args)
        check_turn(turn)
        _baseline[key] = turn
    return _baseline[key]


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_codex_0169_over_grpc_stdio_matches_its_own_host(engine: str) -> None:
    theirs = baseline("0.169.0")
    ours = run_turn(with_our_host("0.169.0", "--engine", engine), steps())
    check_turn(ours)
    compare(ours, theirs)


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_codex_0171_over_grpc_stdio_matches_its_own_host(engine: str) -> None:
    theirs = baseline("0.171.0")
    ours = run_turn(with_our_host("0.171.0", "--engine", engine), steps())
    check_turn(ours)
    compare(ours, theirs)


def test_codex_0171_over_the_framed_protocol_matches_its_own_host() -> None:
    """0.171 requires ``code_mode_host_duration_ns`` in every outcome (0.148 refuses it):
    the host sends it to a client whose hello offers the newer capabilities."""
    theirs = baseline("0.171.0", FRAMED)
    ours = run_turn(with_our_host("0.171.0"), steps(), codex_args=FRAMED)
    check_turn(ours)
    compare(ours, theirs)


# 3 MB of text in one report, the host truncating to a budget that would keep it all:
# Codex 0.171's host keeps its first and last 512 KiB (framed: bounded-output-v1).
FLOOD = (
    '// @exec: {"max_output_tokens": 1000000}\n'
    "for (let i = 0; i < 30; i++) text(String(i % 10).repeat(100000));\n"
)


@pytest.mark.parametrize("codex_args", [(), FRAMED], ids=["grpc", "framed"])
def test_codex_0171_output_past_the_bound_matches_its_own_host(
    codex_args: tuple[str, ...],
) -> None:
    turn_steps = [exec_call(FLOOD)]
    theirs = run_turn(codex_vendor("0.171.0"), turn_steps, codex_args=codex_args)
    ours = run_turn(with_our_host("0.171.0"), list(turn_steps), codex_args=codex_args)
    for turn in (theirs, ours):
        assert turn.rc == 0, turn.stderr[-2000:]
        # 13 items reach Codex (5 + 1 cut, the marker, 1 cut + 5: unbounded, 30), and
        # Codex shows the model the first alone.
        assert "[omitted 12 text items ...]" in output_text(turn.outputs[0])
    compare(ours, theirs)


# Two nested calls 3.5 s apart: with [code_mode] heartbeat_interval_s = 1, three idle
# intervals pass on both streams in between.
PAUSES = (
    'const a = await tools.exec_command({cmd: "echo before-pause", login: false});\n'
    "await new Promise((r) => setTimeout(r, 3500));\n"
    'const b = await tools.exec_command({cmd: "echo after-pause", login: false});\n'
    "text(a.output + b.output);\n"
)
HEARTBEATS = ("-c", "code_mode.heartbeat_interval_s=1")


@pytest.mark.parametrize("codex_args", [(), FRAMED], ids=["grpc", "framed"])
def test_codex_0171_with_heartbeats_matches_its_own_host(codex_args: tuple[str, ...]) -> None:
    """Codex 0.171 asks for heartbeats; a turn whose program pauses past several
    intervals (and, with the catalog revision the host offers, whose later executes
    carry no tool list) goes as with its own host."""
    turn_steps = [exec_call(PAUSES), exec_call(TOOLS), exec_call(LOAD)]
    theirs = run_turn(codex_vendor("0.171.0"), turn_steps, codex_args=HEARTBEATS + codex_args)
    ours = run_turn(
        with_our_host("0.171.0"), list(turn_steps), codex_args=HEARTBEATS + codex_args
    )
    for turn in (theirs, ours):
        assert turn.rc == 0, turn.stderr[-2000:]
        first = output_text(turn.outputs[0])
        assert "before-pause" in first and "after-pause" in first, first
    compare(ours, theirs)


def test_the_newest_codex_in_the_registry_matches_its_own_host() -> None:
    """The version npm tags ``latest`` (installed into the cache when it is not there yet)
    over gRPC, as for 0.171: a Codex release newer than the tests name still matches."""
    version = newest_codex_version()
    installed_codex(version)
    theirs = baseline(version)
    ours = run_turn(with_our_host(version), steps())
    check_turn(ours)
    compare(ours, theirs)


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found.update(int(p) for p in f.read().split())
    return found


def test_codex_0169_through_a_warm_host_matches_its_own_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm shim: the first turn's host is started cold and leaves a warm server;
    the second turn's host is one that server had ready. Both turns as with Codex's."""
    runtime = short_private_folder()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("CODEMODE_WARM", "1")  # the launcher the client falls back to
    vendor = with_our_host("0.169.0", warm=True)
    words = warm_words(vendor / "bin" / "codex-code-mode-host")
    if words is None:
        pytest.skip("no C compiler here: the warm shim is the plain one")
    sock = words[0]
    theirs = baseline("0.169.0")
    server = 0
    try:
        cold = run_turn(vendor, steps())
        check_turn(cold)
        deadline = time.monotonic() + 60
        # Listening (its socket bound; a connection would take the spare): until then a
        # child of the server is a program its preparation runs, not a spare.
        while not (serving(sock) and os.path.exists(sock)):
            assert time.monotonic() < deadline, "the first host left no warm server"
            time.sleep(0.1)
        server = int(Path(sock + ".lock").read_text().split()[0])
        while not (spares := _children(server)):  # the spare (and its worker) being made
            assert time.monotonic() < deadline, "the warm server made no spare"
            time.sleep(0.1)
        warm = run_turn(vendor, steps())
        check_turn(warm)
        compare(warm, theirs)
        # The spare served the turn and ended with it (the next is made a second later).
        assert not spares & _children(server), "the second turn's host was not the warm spare"
    finally:
        if server:
            os.kill(server, signal.SIGTERM)
        shutil.rmtree(runtime, ignore_errors=True)


def test_codex_0148_over_the_framed_protocol_matches_its_own_host() -> None:
    theirs = baseline("0.148.0")
    ours = run_turn(with_our_host("0.148.0"), steps())
    check_turn(ours)
    compare(ours, theirs)


@pytest.mark.parametrize("version", ["0.169.0", "0.171.0"])
def test_codex_app_server_runs_a_code_mode_turn_on_our_host_over_tcp(
    tmp_path: Path, version: str
) -> None:
    """``codex app-server --code-mode-host http://127.0.0.1:PORT``: one turn over the
    app-server's JSON-RPC, its program run by our host on TCP."""
    vendor = codex_vendor(version)
    port = free_port()
    host_log = tmp_path / "host.err"
    with open(host_log, "wb") as err:
        host = subprocess.Popen(
            [INTERPRETER, "code-mode-host", "--listen", f"grpc://127.0.0.1:{port}"],
            env=dict(os.environ, CODEMODE_HOST_TRACE="1"), stderr=err,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    code = (
        'const r = await tools.exec_command({cmd: "echo via-app-server", login: false});\n'
        "text(r.output.trim().toUpperCase());\n"
    )
    try:
        wait_port(port, host)
        with app_server(vendor, port, [exec_call(code), {"text": "done"}]) as (rpc, server):
            rpc.request("initialize", {"clientInfo": {"name": "codemode-test", "version": "1"}})
            rpc.notify("initialized")
            thread = rpc.request("thread/start", {"cwd": str(tmp_path)})["thread"]["id"]
            rpc.request(
                "turn/start",
                {"threadId": thread, "input": [{"type": "text", "text": "run it"}]},
            )
            done = rpc.until("turn/completed")
            assert done["params"]["turn"]["status"] == "completed", done
            outputs = [output_text(o) for o in tool_outputs(server.requests[-1])]
        assert len(outputs) == 1 and outputs[0].startswith("Script completed")
        assert "VIA-APP-SERVER" in outputs[0]
    finally:
        host.terminate()
        host.wait(10)
    trace = host_log.read_text()
    assert "> Execute" in trace and "> CompleteToolCall" in trace, trace[-2000:]
