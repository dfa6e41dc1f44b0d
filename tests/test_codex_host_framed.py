"""`interpreter code-mode-host` with no arguments: the framed stdio protocol Codex 0.148
speaks (JSON messages after a four-byte little-endian length), driven frame by frame."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.codex_host_support import INTERPRETER

HELLO = {
    "type": "connection/hello",
    "supportedVersions": [1],
    "requiredCapabilities": [],
    "optionalCapabilities": ["session-cell-execution-resource-limits"],
}


class Peer:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode())

    def send_raw(self, payload: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack("<I", len(payload)) + payload)
        self.proc.stdin.flush()

    def read(self) -> Any:
        assert self.proc.stdout is not None
        head = self.proc.stdout.read(4)
        assert len(head) == 4, "the host closed its output"
        (length,) = struct.unpack("<I", head)
        return json.loads(self.proc.stdout.read(length))

    def until(self, want: Any) -> Any:
        """The next message ``want`` accepts (cell/closed and the like pass by)."""
        while not want(message := self.read()):
            pass
        return message

    def request(self, rid: int, request: dict[str, Any]) -> None:
        self.send({"type": "operation/request", "id": rid, "request": request})


@contextmanager
def framed_host(*args: str) -> Iterator[Peer]:
    proc = subprocess.Popen(
        [INTERPRETER, "code-mode-host", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield Peer(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def tool_def(name: str) -> dict[str, Any]:
    return {
        "name": name, "tool_name": {"name": name, "namespace": None},
        "description": f"the {name} tool", "kind": "function",
        "input_schema": {"type": "object"}, "output_schema": None,
    }  # fmt: skip


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_a_session_runs_programs_and_delegates_tool_calls(engine: str) -> None:
    args = () if engine == "quickjs" else ("--engine", engine)
    with framed_host(*args) as peer:
        peer.send(HELLO)
        assert peer.read() == {"type": "connection/ready", "selectedVersion": 1, "capabilities": []}
        peer.request(1, {"method": "session/open", "sessionId": "s1"})
        assert peer.read()["result"] == {
            "status": "ok", "value": {"type": "session/ready", "sessionId": "s1"},
        }  # fmt: skip
        source = (
            "const [a, b] = await Promise.all([tools.double({n: 2}), tools.double({n: 5})]);\n"
            "text(a.n + b.n);\nstore('k', 'kept');\n"
            "try { await tools.double({n: -1}); } catch (e) { text(`no: ${e}`); }\n"
            "throw new Error('boom');\n"
        )
        body = {
            "tool_call_id": "call-9", "enabled_tools": [tool_def("double")], "source": source,
            "yield_time_ms": 30000, "max_output_tokens": 1000,
        }  # fmt: skip
        peer.request(2, {"method": "session/execute", "sessionId": "s1", "request": body})
        seen: list[Any] = []
        while True:
            message = peer.read()
            seen.append(message)
            if message["type"] == "delegate/request":
                invocation = message["request"]["invocation"]
                n = invocation["input"]["n"]
                result = (
                    {"status": "error", "message": "negative"}
                    if n < 0
                    else {"status": "ok", "value": {"type": "tool/result", "result": {"n": 2 * n}}}
                )
                peer.send({"type": "delegate/response", "id": message["id"], "result": result})
            elif message["type"] == "execute/initialResponse":
                break
        started = next(m for m in seen if m["type"] == "operation/response")
        cell = started["result"]["value"]["cellId"]
        assert started["result"]["value"]["type"] == "execution/started"
        outcome = seen[-1]["result"]["value"]["Result"]
        assert outcome["cell_id"] == cell
        assert [i["text"] for i in outcome["content_items"]] == ["14", "no: negative"]
        assert outcome["error_text"].startswith("Error: boom\n    at exec_main.mjs:5:")
        calls = [m for m in seen if m["type"] == "delegate/request"]
        assert {c["request"]["invocation"]["tool_name"]["name"] for c in calls} == {"double"}
        assert all(c["sessionId"] == "s1" for c in calls)
        # The store outlives the exec; an unknown session and an unknown cell are errors
        # answered in place; then the session closes.
        body = {"tool_call_id": "call-10", "enabled_tools": [], "source": "text(load('k'))"}
        peer.request(3, {"method": "session/execute", "sessionId": "s1", "request": body})
        later = peer.until(lambda m: m["type"] == "execute/initialResponse")
        assert later["result"]["value"]["Result"]["content_items"] == [
            {"type": "input_text", "text": "kept"}
        ]
        peer.request(4, {"method": "session/wait", "sessionId": "nope",
                         "request": {"cell_id": "1", "yield_time_ms": 10}})  # fmt: skip
        bad = peer.until(lambda m: m.get("id") == 4)
        assert bad["id"] == 4 and bad["result"]["status"] == "error"
        assert "nope" in bad["result"]["message"]
        peer.request(5, {"method": "session/wait", "sessionId": "s1",
                         "request": {"cell_id": "77", "yield_time_ms": 10}})  # fmt: skip
        missing = peer.until(lambda m: m.get("id") == 5)["result"]["value"]["outcome"]
        assert "MissingCell" in missing
        peer.request(6, {"method": "session/shutdown", "sessionId": "s1"})
        closed = peer.until(lambda m: m.get("id") == 6)
        assert closed["result"]["value"] == {"type": "session/closed", "sessionId": "s1"}


def test_yield_wait_and_terminate() -> None:
    with framed_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.read()
        source = (
            'text("a");\nyield_control();\n'
            "while (true) { await new Promise(r => setTimeout(r, 20)); }"
        )
        body = {"tool_call_id": "c", "enabled_tools": [], "source": source, "yield_time_ms": 30000}
        peer.request(2, {"method": "session/execute", "sessionId": "s", "request": body})
        initial = peer.until(lambda m: m["type"] == "execute/initialResponse")
        yielded = initial["result"]["value"]["Yielded"]
        assert yielded["content_items"] == [{"type": "input_text", "text": "a"}]
        peer.request(3, {"method": "session/terminate", "sessionId": "s",
                         "cellId": yielded["cell_id"]})  # fmt: skip
        replies = [peer.read(), peer.read()]  # the answer and cell/closed, in either order
        answer = next(r for r in replies if r["type"] == "operation/response")
        assert "Terminated" in answer["result"]["value"]["outcome"]["LiveCell"]
        assert {"type": "cell/closed", "sessionId": "s", "cellId": yielded["cell_id"]} in replies


# What Codex 0.171 offers in its hello (tests/data/codex-0.171/framed-client.bin).
HELLO_0171 = {
    **HELLO,
    "optionalCapabilities": [
        "bounded-output-v1", "delegate-capacity-4096", "session-cell-execution-resource-limits",
        "tool-catalog-revision-v1", "yield-observation",
    ],
}  # fmt: skip


def _outcomes(hello: dict[str, Any]) -> list[dict[str, Any]]:
    """Every outcome body of one session's yielded, completed, waited and terminated cells."""
    with framed_host() as peer:
        peer.send(hello)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.read()
        found: list[dict[str, Any]] = []
        sources = ['text("done");', 'text("a");\nyield_control();\nawait new Promise(r => '
                   'setTimeout(r, 200));\ntext("b");', "while (true) { await 0; }"]  # fmt: skip
        for rid, source in enumerate(sources, start=2):
            body = {"tool_call_id": f"c{rid}", "enabled_tools": [], "source": source,
                    "yield_time_ms": 30000 if rid != 4 else 100}  # fmt: skip
            peer.request(rid, {"method": "session/execute", "sessionId": "s", "request": body})
            initial = peer.until(lambda m: m["type"] == "execute/initialResponse")
            ((_, outcome),) = initial["result"]["value"].items()
            found.append(outcome)
            cell = outcome["cell_id"]
            if rid == 3:
                wait = {"cell_id": cell, "yield_time_ms": 30000}
                peer.request(10, {"method": "session/wait", "sessionId": "s", "request": wait})
                waited = peer.until(lambda m: m.get("id") == 10)
                ((_, body_),) = waited["result"]["value"]["outcome"]["LiveCell"].items()
                found.append(body_)
            if rid == 4:
                peer.request(11, {"method": "session/terminate", "sessionId": "s", "cellId": cell})
                ended = peer.until(lambda m: m.get("id") == 11)
                ((_, body_),) = ended["result"]["value"]["outcome"]["LiveCell"].items()
                found.append(body_)
        return found


def test_a_client_offering_the_newer_revision_gets_the_host_duration_in_each_outcome() -> None:
    """Codex 0.171 refuses an outcome without ``code_mode_host_duration_ns`` ("missing
    field"); its hello offers the capabilities of the revision that added it."""
    outcomes = _outcomes(HELLO_0171)
    assert len(outcomes) == 5
    for outcome in outcomes:
        duration = outcome.get("code_mode_host_duration_ns")
        assert isinstance(duration, int) and duration > 0, outcome
    # The completed ones also say how long their result waited (none of ours does).
    assert outcomes[0]["result_buffered_for_ns"] == 0
    assert outcomes[2]["result_buffered_for_ns"] == 0


@pytest.mark.parametrize(
    "offered",
    [["session-cell-execution-resource-limits"], [], ["something-new-v9"]],
)
def test_a_client_offering_only_what_0148_knows_gets_no_field_it_would_refuse(
    offered: list[str],
) -> None:
    """Codex 0.148 refuses an outcome carrying ``code_mode_host_duration_ns`` ("unknown
    field"); its hello offers ``session-cell-execution-resource-limits`` alone."""
    outcomes = _outcomes({**HELLO, "optionalCapabilities": offered})
    assert len(outcomes) == 5
    for outcome in outcomes:
        assert "code_mode_host_duration_ns" not in outcome, outcome
        assert "result_buffered_for_ns" not in outcome, outcome


@pytest.mark.parametrize(
    ("hello", "reason"),
    [
        ({**HELLO, "supportedVersions": [7]}, "noCompatibleVersion"),
        ({**HELLO, "requiredCapabilities": ["time-travel"]}, "missingRequiredCapability"),
        ({"type": "operation/request", "id": 1}, "invalidHello"),
    ],
)
def test_a_handshake_the_host_cannot_meet_is_rejected(hello: Any, reason: str) -> None:
    with framed_host() as peer:
        peer.send(hello)
        rejected = peer.read()
        assert rejected["type"] == "connection/rejected"
        assert rejected["reason"]["type"] == reason
        assert peer.proc.wait(30) == 1


def test_a_frame_that_is_not_json_ends_the_host_without_a_traceback() -> None:
    with framed_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.send_raw(b"{not json")
        assert peer.proc.wait(30) == 1
        assert peer.proc.stderr is not None
        assert b"Traceback" not in peer.proc.stderr.read()


def _deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def test_a_deeply_nested_frame_is_a_protocol_error_and_the_host_serves_on() -> None:
    """A request nested far deeper than any message needs (the JSON decoder's own
    recursion gives up at a thousand levels or so): it is answered with an error, not a
    traceback, and so is a frame whose request id cannot be read; the host serves on."""
    with framed_host() as peer:
        peer.send(HELLO)
        peer.read()
        body = b'{"method":"session/open","sessionId":"s1","x":' + _deep(100_000) + b"}"
        peer.send_raw(b'{"type":"operation/request","id":7,"request":' + body + b"}")
        refused = peer.until(lambda m: m.get("id") == 7)
        assert refused["type"] == "operation/response"
        assert refused["result"]["status"] == "error"
        assert "nested" in refused["result"]["message"]
        peer.send_raw(_deep(100_000))  # nothing to answer it by: dropped, said on stderr
        peer.request(8, {"method": "session/open", "sessionId": "s2"})
        opened = peer.until(lambda m: m.get("id") == 8)
        assert opened["result"]["status"] == "ok"
        assert peer.proc.stdin is not None
        peer.proc.stdin.close()
        assert peer.proc.wait(30) == 0
        assert peer.proc.stderr is not None
        err = peer.proc.stderr.read()
        assert b"Traceback" not in err and b"nested" in err, err


def test_a_tool_result_nested_too_deeply_fails_its_call_and_the_program_goes_on() -> None:
    with framed_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s1"})
        peer.until(lambda m: m.get("id") == 1)
        source = "try { await tools.deep({}); } catch (e) { text(`failed: ${e}`); }"
        body = {"tool_call_id": "c", "enabled_tools": [tool_def("deep")], "source": source}
        peer.request(2, {"method": "session/execute", "sessionId": "s1", "request": body})
        call = peer.until(lambda m: m["type"] == "delegate/request")
        head = b'{"type":"delegate/response","id":%d,"result":' % call["id"]
        peer.send_raw(head + _deep(100_000) + b"}")
        done = peer.until(lambda m: m["type"] == "execute/initialResponse")
        [item] = done["result"]["value"]["Result"]["content_items"]
        assert item["text"].startswith("failed: ") and "nested" in item["text"], item


def test_sessions_on_one_connection_are_capped() -> None:
    """The framed host has one client (its stdio): the session past the cap (16 by
    default) is refused in place; one shut down makes room."""
    with framed_host() as peer:
        peer.send(HELLO)
        peer.read()
        for n in range(16):
            peer.request(n + 1, {"method": "session/open", "sessionId": f"s{n}"})
            assert peer.until(lambda m, n=n: m.get("id") == n + 1)["result"]["status"] == "ok"
        peer.request(50, {"method": "session/open", "sessionId": "one-too-many"})
        refused = peer.until(lambda m: m.get("id") == 50)["result"]
        assert refused["status"] == "error" and "16" in refused["message"], refused
        peer.request(51, {"method": "session/shutdown", "sessionId": "s0"})
        peer.until(lambda m: m.get("id") == 51)
        peer.request(52, {"method": "session/open", "sessionId": "one-more"})
        assert peer.until(lambda m: m.get("id") == 52)["result"]["status"] == "ok"


@pytest.mark.parametrize("listen", ["stdio", "grpc+stdio://"])
def test_a_stdin_the_event_loop_cannot_wait_on_is_read_to_its_end(
    listen: str, tmp_path: Path
) -> None:
    """/dev/null and regular files are refused by epoll: the host reads them on a
    thread instead of printing asyncio's traceback and hanging."""
    done = subprocess.run(
        [INTERPRETER, "code-mode-host", "--listen", listen],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr, done.stderr
    if listen != "stdio":
        return
    # The framed protocol from a file to a file: the hello is answered, then the end.
    hello = json.dumps(HELLO).encode()
    (tmp_path / "in").write_bytes(struct.pack("<I", len(hello)) + hello)
    with (tmp_path / "in").open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        done = subprocess.run(
            [INTERPRETER, "code-mode-host"], stdin=stdin, stdout=stdout,
            stderr=subprocess.PIPE, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    out = (tmp_path / "out").read_bytes()
    (length,) = struct.unpack("<I", out[:4])
    assert json.loads(out[4 : 4 + length])["type"] == "connection/ready"


def test_a_listen_address_it_cannot_serve_is_a_usage_error() -> None:
    done = subprocess.run(
        [INTERPRETER, "code-mode-host", "--listen", "ws://127.0.0.1:9"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "expected stdio, grpc+stdio:// or grpc://HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_host_serves_and_refuses_bad_options_in_clicks_words() -> None:
    """`code-mode-host` with options it takes serves; what click refuses is a usage
    error in click's words."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", INTERPRETER, "code-mode-host",
         "--engine=quickjs", "--memory-mb", "64"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        peer = Peer(proc)
        peer.send(HELLO)
        assert peer.read()["type"] == "connection/ready"
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        assert proc.wait(30) == 0
        imported = {
            line.rsplit("|", 1)[-1].strip()
            for line in proc.stderr.read().decode().splitlines()
            if line.startswith("import time:")
        }
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "codemode.codex_host.framed.protocol" in imported  # (the lines are there to read)
    for args, said in [
        (["--engine", "nope"], "'nope' is not one of"),
        (["--memory-mb", "8"], "8 is not in the range"),
        (["--listen", "stdio", "--listen", "stdio", "--bogus"], "No such option"),
    ]:
        done = subprocess.run(
            [INTERPRETER, "code-mode-host", *args],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr, (args, done.stderr)
