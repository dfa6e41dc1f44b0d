"""The benchmark and eval tasks (codemode/eval/tasks/<task>/) as data: each folder loads,
its verify.py rejects the untouched workspace, and both of its scripts drive a real agent session
(claude-code harness, real tools and isolate, the scripted model server) to the same
workspace, which verify.py accepts."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
# Appended, so that none of the scripts there shadows an installed module.
sys.path.append(str(BENCHMARKS))

import dialects  # noqa: E402  (a script folder, not a package)

TASKS = dialects.load_tasks()


def test_every_task_folder_is_loaded() -> None:
    folders = {p.name for p in dialects.TASKS_DIR.iterdir() if p.is_dir()}
    assert {t.name for t in TASKS} == folders
    assert len(TASKS) >= 8


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_task_scripts_and_verify(task: dialects.Task, tmp_path: Path) -> None:
    classic, code = task.classic(), task.code()
    assert classic[-1] == {"text": task.answer} and code[-1] == {"text": task.answer}
    assert len(code) >= 2 and all(s["tool_calls"][0]["name"] == "exec" for s in code[:-1])
    assert all(s["tool_calls"][0]["arguments"]["code"].strip() for s in code[:-1])
    task.setup(tmp_path)
    with pytest.raises((AssertionError, FileNotFoundError)):
        task.verify(tmp_path)  # a verify.py that accepts the start checks nothing


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_both_dialects_reach_the_same_verified_end(
    task: dialects.Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = []
    for code in (False, True):
        root, home = tmp_path / f"repo-{code}", tmp_path / f"home-{code}"
        root.mkdir()
        home.mkdir()
        monkeypatch.setenv("CODEMODE_HOME", str(home))
        out = asyncio.run(dialects.run_once(task, code, root, home))  # runs verify.py
        assert out["round_trips"] == len(task.code() if code else task.classic())
        digests.append(out["digest"])
    assert digests[0] == digests[1]
