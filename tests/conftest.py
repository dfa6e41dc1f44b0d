"""Fixtures shared by the agent-level tests: a private CODEMODE_HOME and a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty CODEMODE_HOME (config, sessions, rules) for one test."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A small workspace with one file (tests that need more define their own)."""
    w = tmp_path / "work"
    w.mkdir()
    (w / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    return w
