"""A write journal is never seen, by another process's recovery, before its writer
holds its lock.

Every entry point runs ``journal.recover`` on its workspace at start; two codemode
processes in one workspace (an agent session and a batch, two sessions) do so beside
each other's commits. A journal written under a temporary name was visible between its
creation and its writer's ``flock``: a recovery that came then took it for one a killed
writer left, and removed it (seen: about 1 commit in 100 with a recovery looping beside
it, each then made without a journal, unprotected against a kill). It is made without a
name now (``O_TMPFILE``) and named once whole and locked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.tools.store import journal

RECOVERING = """
import sys
from pathlib import Path
from codemode.tools.store import journal
workspace = Path(sys.argv[1])
print("ready", flush=True)
while True:
    journal.recover(workspace)
"""

COMMITS = 3000


def test_a_recovery_beside_never_takes_a_journal_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    journal.open_dir()
    recovering = subprocess.Popen(
        [sys.executable, "-c", RECOVERING, str(workspace)],
        env={**os.environ, "CODEMODE_HOME": str(home)},
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert recovering.stdout is not None and recovering.stdout.readline() == "ready\n"
        lost = 0
        for _ in range(COMMITS):
            recording = journal.begin(workspace, [workspace], [], journal.new_tag())
            lost += recording.path is None
            if recording.path is not None:
                assert recording.path.exists()  # not removed under its writer either
            recording.close()
        assert recovering.poll() is None, "the recovering process died"
    finally:
        recovering.kill()
        recovering.wait(10)
    assert lost == 0, f"{lost} of {COMMITS} commits lost their journal to a recovery beside"
    assert not list(journal.journal_dir().iterdir())  # each removed by its own close
