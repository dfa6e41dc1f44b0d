"""What the execpolicy attack tests share: a codemode home and a workspace of their own
for each test, and ``judge`` (a command's decision, and the rule and reason that
decided it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.sandbox.execpolicy.policy import Policy, PolicyContext


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the user's real ~/.codemode out of every test."""
    h = tmp_path / "codemode-home"
    monkeypatch.setenv("CODEMODE_HOME", str(h))
    return h


@pytest.fixture(autouse=True)
def system_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system's programs only: a version manager's shims or rustup's proxies on this
    machine's PATH make their allows prompts (``program_source``), tested on their own."""
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


def judge(command: str, ws: Path, home: Path) -> tuple[str, str]:
    ev = Policy().evaluate(command, PolicyContext(cwd=ws, writable_roots=(ws,), home=home))
    d = ev.deciding
    return ev.decision, f"{d.rule} / {d.justification}" if d else ""
