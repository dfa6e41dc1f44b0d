"""The framed protocol's optional capabilities `delegate-capacity-4096` and
`bounded-output-v1`, and what a framed client can make the host queue, attacked from the
client's side: more tool calls and notifications than the capacity while it answers none,
and output past the bound. The figures are Codex 0.171's own host's answers to the same
requests (docs/codex-host.md, "Codex 0.171's additions")."""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.codex_host_support import INTERPRETER

CODEX_ERROR = "code-mode host has too many pending delegate calls"


class RawPeer:
    """A framed client that reads with deadlines (a host that sends nothing more is seen)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.buffer = b""

    def send(self, message: Any) -> None:
        payload = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack("<I", len(payload)) + payload)
        self.proc.stdin.flush()

    def _fill(self, want: int, deadline: float) -> bool:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while len(self.buffer) < want:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise AssertionError("the host closed its output")
            self.buffer += chunk
        return True

    def read(self, timeout: float = 30.0) -> Any:
        """The next frame, or None when none comes within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        if not self._fill(4, deadline):
            return None
        (length,) = struct.unpack("<I", self.buffer[:4])
        if not self._fill(4 + length, deadline):
            return None
        frame, self.buffer = self.buffer[4 : 4 + length], self.buffer[4 + length :]
        return json.loads(frame)

    def request(self, rid: int, request: dict[str, Any]) -> None:
        self.send({"type": "operation/request", "id": rid, "request": request})

    def open(self, capabilities: list[str], session: str = "s", **extra: Any) -> list[str]:
        self.send({"type": "connection/hello", "supportedVersions": [1],
                   "requiredCapabilities": [], "optionalCapabilities": capabilities})  # fmt: skip
        ready = self.read()
        assert ready["type"] == "connection/ready", ready
        self.request(1, {"method": "session/open", "sessionId": session, **extra})
        assert self.read()["result"]["status"] == "ok"
        granted: list[str] = ready["capabilities"]
        return granted

    def execute(self, rid: int, source: str, session: str = "s", **body: Any) -> None:
        request = {"tool_call_id": f"c{rid}", "enabled_tools": [_tool("t")], "source": source,
                   "yield_time_ms": 30000, "max_output_tokens": None, **body}  # fmt: skip
        self.request(rid, {"method": "session/execute", "sessionId": session, "request": request})

    def answer(self, request: dict[str, Any]) -> None:
        kind = request["request"]["type"]
        value: dict[str, Any] = (
            {"type": "tool/result", "result": {"ok": 1}}
            if kind == "tool/invoke"
            else {"type": "notification/delivered"}
        )
        self.send({"type": "delegate/response", "id": request["id"],
                   "result": {"status": "ok", "value": value}})  # fmt: skip


@contextmanager
def framed_host() -> Iterator[RawPeer]:
    proc = subprocess.Popen(
        [INTERPRETER, "code-mode-host"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
    )  # fmt: skip
    try:
        yield RawPeer(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def _tool(name: str) -> dict[str, Any]:
    return {
        "name": name, "tool_name": {"name": name, "namespace": None}, "description": "t",
        "kind": "function", "input_schema": {"type": "object"}, "output_schema": None,
    }  # fmt: skip


def _outcome(message: dict[str, Any]) -> dict[str, Any]:
    value = message["result"]["value"]
    if "outcome" in value:
        value = value["outcome"]["LiveCell"]
    ((_, body),) = value.items()
    outcome: dict[str, Any] = body
    return outcome


def _texts(outcome: dict[str, Any]) -> list[str]:
    return [i["text"] for i in outcome["content_items"] if i["type"] == "input_text"]


# Calls made in batches with a timer between them, as a program that keeps calling does.
_CALLS = (
    "const ps = [];\n"
    "for (let i = 0; i < {n}; i++) {{\n"
    "  ps.push(tools.t({{i}}).then(() => 'ok', (e) => 'ERR:' + String(e)));\n"
    "  if (i % 50 === 49) await new Promise((r) => setTimeout(r, 5));\n"
    "}}\n"
    # A turn of the timers first: every call above has gone to the client by then.
    "await new Promise((r) => setTimeout(r, 50));\n"
    "yield_control();\n"
    "const r = await Promise.all(ps);\n"
    "const errs = r.filter((x) => x !== 'ok');\n"
    "text(errs.length + ' failed: ' + errs[0]);\n"
)


def _requests_until_yield(peer: RawPeer) -> list[dict[str, Any]]:
    """The delegate requests the host sends before the cell's first outcome, unanswered."""
    requests: list[dict[str, Any]] = []
    while True:
        message = peer.read()
        assert message is not None, f"the host went silent after {len(requests)} requests"
        if message["type"] == "delegate/request":
            requests.append(message)
        elif message["type"] == "execute/initialResponse":
            assert "Yielded" in message["result"]["value"], message
            return requests


@pytest.mark.parametrize(
    ("offered", "capacity"),
    [
        # Codex 0.171's hello: it says it takes 4,096 delegate requests at once.
        (["bounded-output-v1", "delegate-capacity-4096", "tool-catalog-revision-v1"], 4096),
        # Codex 0.148's: it says nothing, and Codex's host holds 1,024 then.
        (["session-cell-execution-resource-limits"], 1024),
    ],
)
def test_calls_past_the_delegate_capacity_fail_as_with_codexs_host(
    offered: list[str], capacity: int
) -> None:
    """A program makes more calls than the client takes while the client answers none:
    the host sends the capacity's worth, and each call past it fails at once with Codex's
    host's message; answered, the rest go through."""
    with framed_host() as peer:
        granted = peer.open(offered)
        assert ("delegate-capacity-4096" in granted) == (capacity == 4096)
        extra = 100
        peer.execute(2, _CALLS.format(n=capacity + extra))
        requests = _requests_until_yield(peer)
        assert len(requests) == capacity
        for request in requests:
            peer.answer(request)
        peer.request(3, {"method": "session/wait", "sessionId": "s",
                         "request": {"cell_id": "1", "yield_time_ms": 30000}})  # fmt: skip
        while (message := peer.read()) is not None and message.get("id") != 3:
            assert message["type"] != "delegate/request", "a request past the capacity"
        assert message is not None
        assert _texts(_outcome(message)) == [f"{extra} failed: ERR:{CODEX_ERROR}"]


def test_the_capacity_is_the_connections_across_its_sessions() -> None:
    """Two sessions on one connection share it, as with Codex's host (1,024 in all)."""
    with framed_host() as peer:
        peer.open([], session="a")
        peer.request(9, {"method": "session/open", "sessionId": "b"})
        assert peer.read()["result"]["status"] == "ok"
        peer.execute(2, _CALLS.format(n=700), session="a")
        first = _requests_until_yield(peer)
        peer.execute(3, _CALLS.format(n=700), session="b")
        second = _requests_until_yield(peer)
        assert len(first) == 700 and len(second) == 1024 - 700


def test_notifications_past_the_capacity_are_not_queued_and_the_report_says_so() -> None:
    """A program notifies in a loop while the client answers nothing: the host holds no
    more than the capacity (Codex's host stops the program there), and the cell's report
    says how many were not sent."""
    with framed_host() as peer:
        peer.open([])
        source = (
            "for (let i = 0; i < 1100; i++) {\n"
            "  notify('n' + i);\n"
            "  if (i % 50 === 49) await new Promise((r) => setTimeout(r, 5));\n"
            "}\n"
            "text('went on');\n"
        )
        peer.execute(2, source)
        notes = 0
        while (message := peer.read()) is not None:
            if message["type"] == "delegate/request":
                assert message["request"]["type"] == "notification/send"
                notes += 1
            elif message["type"] == "execute/initialResponse":
                break
        assert message is not None, f"no outcome after {notes} notifications"
        assert notes == 1024
        texts = _texts(_outcome(message))
        assert texts[0] == "went on"
        assert texts[1].startswith("[76 notifications were not sent:")


def test_a_notify_loop_the_client_reads_but_never_answers_keeps_the_host_bounded() -> None:
    """A program that notifies without end to a client that reads every frame and answers
    none: the host sends the capacity's worth and then holds nothing more (a client that
    reads nothing at all stops the host's writes when the pipe is full)."""
    with framed_host() as peer:
        peer.open([])
        peer.execute(2, "const big = 'x'.repeat(1000);\nwhile (true) { notify(big); "
                        "await new Promise((r) => setTimeout(r, 0)); }")  # fmt: skip
        notes = 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            message = peer.read(timeout=max(0.01, deadline - time.monotonic()))
            if message is not None and message["type"] == "delegate/request":
                notes += 1
        assert notes == 1024


# -- bounded-output-v1 -------------------------------------------------------------------


def _marker(omitted: int, segments: int) -> str:
    return (
        f"[Code Mode session output limit reached: omitted {omitted} text bytes; "
        f"discarded {segments} text segments, 0 images, 0 audio items]"
    )


def _report(
    source: str, max_output_tokens: int | None = 100_000_000, **open_extra: Any
) -> dict[str, Any]:
    with framed_host() as peer:
        granted = peer.open(["bounded-output-v1", "tool-catalog-revision-v1"], **open_extra)
        assert "bounded-output-v1" in granted
        peer.execute(2, source, max_output_tokens=max_output_tokens)
        while (message := peer.read(60)) is not None:
            if message["type"] == "execute/initialResponse":
                return _outcome(message)
        raise AssertionError("no outcome")


def test_output_past_the_bound_keeps_its_head_and_tail_as_codexs_host_does() -> None:
    """30 texts of 100,000 bytes with the host truncating: the first and last 512 KiB are
    kept, the middle said by Codex's marker (its host's answer to the same program)."""
    outcome = _report(
        "for (let i = 0; i < 30; i++) text(String(i % 10).repeat(100000));",
        outputTruncation="server",
    )
    texts = _texts(outcome)
    assert [len(t) for t in texts] == [100000] * 5 + [24288, len(_marker(1951424, 19)), 24288] + [
        100000
    ] * 5
    assert texts[5] == "5" * 24288 and texts[7] == "4" * 24288
    assert texts[6] == _marker(1951424, 19)


def test_images_keep_their_places_past_the_bound() -> None:
    outcome = _report(
        "const img = 'data:image/png;base64,iVBORw0KGgo=';\n"
        "for (let i = 0; i < 30; i++) { text(String(i % 10).repeat(100000));"
        " if (i == 2 || i == 15 || i == 28) image(img); }",
        outputTruncation="server",
    )
    kinds = [
        i["type"] if i["type"] != "input_text" or not i["text"].startswith("[Code Mode")
        else i["text"] for i in outcome["content_items"]
    ]  # fmt: skip
    assert kinds == (
        ["input_text"] * 3 + ["input_image"] + ["input_text"] * 3
        + [_marker(1075712, 11), "input_image", _marker(875712, 8)]
        + ["input_text"] * 5 + ["input_image", "input_text"]
    )  # fmt: skip


def test_a_flood_of_output_costs_the_bound_not_the_flood() -> None:
    """100 MiB of text in one report comes back as the bound, not as 100 MiB."""
    outcome = _report(
        "for (let i = 0; i < 100; i++) text('x'.repeat(1 << 20));", outputTruncation="server"
    )
    texts = _texts(outcome)
    assert texts[1] == _marker(103809024, 99)
    assert sum(len(t) for t in texts) < 2 << 20


def test_truncation_keeps_the_marker_between_the_cut_head_and_tail() -> None:
    """The same 3 MB with the default budget (10,000 tokens): the bounded text is cut as
    one, and Codex's host sends the cut head, the marker, then the cut tail."""
    outcome = _report(
        "for (let i = 0; i < 30; i++) text(String(i % 10).repeat(100000));",
        max_output_tokens=None,
        outputTruncation="server",
    )
    texts = _texts(outcome)
    assert len(texts) == 3
    head = (
        "Warning: truncated output (original token count: 262147)\n"
        "Total output lines: 12\n\n" + "0" * 20000 + "\u2026252147 tokens truncated\u2026"
    )
    assert texts == [head, _marker(1951424, 19), "9" * 20000]


def test_a_thrown_error_is_bounded_with_the_output() -> None:
    """The error a truncating host reports among the items comes last in the bounded
    text, as from Codex's host: 51 more bytes leave the tail (its marker's count)."""
    outcome = _report(
        "for (let i = 0; i < 100; i++) text('x'.repeat(1 << 20));\nthrow new Error('late');",
        max_output_tokens=None,
        outputTruncation="server",
    )
    texts = _texts(outcome)
    assert texts[0].startswith("Warning: truncated output (original token count: 262145)\n")
    assert texts[1] == _marker(103809075, 99)
    # (the column is the engine's: docs/codex-host.md, "Known differences")
    assert "\nScript error:\nError: late\n    at exec_main.mjs:2:" in texts[2][-60:]
