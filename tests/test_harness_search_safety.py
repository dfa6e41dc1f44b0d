"""The emulated search tools run a model's patterns the way the grep tool does: RE2
(linear time, so a catastrophic pattern cannot stall the session) over files read
through read_file (regular files only, byte-capped). Driven end to end through
`interpreter exec --harness claude-code` against the scripted model server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import call, provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer

# Python's re needs ~2**n steps for "(a+)+$" on n a's and a non-matching end: this line
# alone would hold the session for longer than the universe has existed.
LONG = "a" * 20_000 + "!\n"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    w.mkdir()
    (w / "long.txt").write_text(LONG, encoding="utf-8")
    (w / "app.py").write_text("def greet(name):\n    return name\n", encoding="utf-8")
    (w / "wide.log").write_text("é" * 3_000_000 + "\n", encoding="utf-8")  # one 6 MB line
    return w


def grep_results(script_calls: list[dict[str, Any]], home: Path, work: Path) -> list[str]:
    script = [{"tool_calls": script_calls}, {"text": "ok"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--harness", "claude-code", "x"],
            home=home, cwd=work, timeout=120,
        )
    assert run.code == 0, run.stderr
    return [m["content"] for m in server.requests[1].body["messages"] if m.get("role") == "tool"]


def test_catastrophic_multiline_pattern_returns_promptly(home: Path, work: Path) -> None:
    # The same session with a harmless pattern sets the pace on this (loaded) machine.
    t0 = time.monotonic()
    grep_results([call("Grep", {"pattern": "greet", "multiline": True})], home, work)
    baseline = time.monotonic() - t0
    t0 = time.monotonic()
    evil, found, everywhere = grep_results(
        [
            call("Grep", {"pattern": "(a+)+$", "multiline": True, "output_mode": "content"}),
            call("Grep", {"pattern": r"greet\(name\):\n\s+return", "multiline": True,
                          "output_mode": "content"}),
            # Matches at every byte: reported once per line, the line cut short.
            call("Grep", {"pattern": "x*", "multiline": True, "path": "wide.log",
                          "output_mode": "content", "head_limit": 10**9}),
        ],
        home, work,
    )
    took = time.monotonic() - t0
    assert evil.startswith("no matches"), evil
    assert found == "app.py:1: def greet(name):"
    assert everywhere.startswith("wide.log:1: éé") and len(everywhere) < 1000, everywhere[:80]
    assert took < 3 * baseline + 10, (took, baseline)


def test_multiline_pattern_errors_name_re2(home: Path, work: Path) -> None:
    (out,) = grep_results([call("Grep", {"pattern": r"(a)\1", "multiline": True})], home, work)
    assert "invalid regular expression" in out and "RE2" in out, out


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this system")
def test_multiline_grep_refuses_devices_and_fifos(home: Path, work: Path) -> None:
    os.mkfifo(work / "pipe")  # nobody writes: opening it for reading would block forever
    t0 = time.monotonic()
    zero, fifo, tree = grep_results(
        [
            call("Grep", {"pattern": "x", "multiline": True, "path": "/dev/zero"}),
            call("Grep", {"pattern": "x", "multiline": True, "path": "pipe"}),
            call("Grep", {"pattern": "return", "multiline": True, "output_mode": "content"}),
        ],
        home, work,
    )
    assert time.monotonic() - t0 < 100
    assert "character device, not a regular file" in zero, zero
    assert "FIFO" in fifo and "not a regular file" in fifo, fifo
    assert tree == "app.py:2:     return name"
