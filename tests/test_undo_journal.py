"""``/undo`` survives kill -9 as a patch does: whatever point the process dies at, the
next codemode touch of the workspace leaves the files as they were before the undo or
as the undo makes them, never between, with no temporary file, folder or journal left
behind (``codemode.tui.snapshots`` writes through ``codemode.tools.store.journal``).
Every kill is a real SIGKILL of a real process, at each step in turn."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_patch_journal import KILL_AT_STEP, env_for, journals, tree_state

# In a child: a turn is recorded (a file changed, one removed, one created in new
# folders, one replaced by a symlink), then every call that changes the disk counts as
# a step, and the child kills itself with SIGKILL just before step ``n`` of the undo.
KILLER = KILL_AT_STEP + """
import os, signal, sys, tempfile
from pathlib import Path
from codemode.tui.snapshots import Snapshots
n = int(sys.argv[1]); ws = Path(sys.argv[2])
snaps = Snapshots(ws, store=Path(tempfile.mkdtemp()))
snaps.begin_turn()
(ws / "a.txt").write_text("changed by the turn\\n")
(ws / "gone.txt").unlink()
(ws / "new" / "deep").mkdir(parents=True)
(ws / "new" / "deep" / "n.txt").write_text("made by the turn\\n")
(ws / "swapped.txt").unlink()
(ws / "swapped.txt").symlink_to("a.txt")
assert snaps.end_turn() is not None
print("TURN", flush=True)
count = kill_at_step(n)
result = snaps.undo()
assert not result.failed, result.failed
print("DONE", count[0])
"""


def base_tree(ws: Path) -> None:
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "gone.txt").write_text("gone\n")
    (ws / "swapped.txt").write_text("a file\n")
    (ws / "kept.txt").write_text("untouched\n")


def run_killed(n: int, ws: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", KILLER, str(n), str(ws)],
        capture_output=True,
        text=True,
        env=env_for(home),
        timeout=120,
    )


def test_undo_killed_at_every_step_is_before_or_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.tools.store.journal import recover

    home = tmp_path / "home"
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    # The undo's "before": the turn done, not undone (killed before any step).
    base = tmp_path / "base"
    base_tree(base)
    after = tree_state(base)  # an undo puts back the tree as it was before the turn
    done = tmp_path / "done"
    shutil.copytree(base, done, symlinks=True)
    proc = run_killed(0, done, home)
    assert proc.returncode == 0, proc.stderr
    assert tree_state(done) == after
    assert journals(home) == []
    before: dict[str, object] | None = None
    between = 0
    for n in range(1, 200):
        ws = tmp_path / f"ws{n}"
        shutil.copytree(base, ws, symlinks=True)
        proc = run_killed(n, ws, home)
        assert "TURN" in proc.stdout, proc.stderr
        if proc.returncode == 0:
            assert tree_state(ws) == after
            break  # no step n: every point has been tried
        assert proc.returncode == -signal.SIGKILL, (n, proc.stdout, proc.stderr)
        if n == 1:
            before = tree_state(ws)  # killed at the undo's first step: nothing undone
            assert before != after
        if tree_state(ws) not in (before, after):
            between += 1
        recover(ws)  # what the next touch of the workspace (or the next undo) does first
        state = tree_state(ws)
        assert state in (before, after), f"killed before step {n}: {state}"
        assert journals(home) == [], n
    else:
        raise AssertionError("the undo never finished")
    # Some kills did land between the two states (else this proves nothing).
    assert between > 0
