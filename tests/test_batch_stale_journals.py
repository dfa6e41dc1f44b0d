"""A batch worker killed inside its scratch copy leaves a write journal for a folder that
is then removed: the next batch run drops it, and only such journals (the copy's scratch
folder gone; no commit holding it; the journal's name that folder's key)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_batch import interp

from codemode.tools.store import journal
from codemode.tools.store.journal_format import Entry


def _left_journal(workspace: Path, *, locked: bool = False) -> journal.Recording:
    """The journal a process killed in ``workspace`` mid-commit leaves behind."""
    workspace.mkdir(parents=True, exist_ok=True)
    rec = journal.begin(workspace, [workspace], [Entry(workspace / "f.txt")], journal.new_tag())
    assert rec.path is not None
    if not locked:
        rec.close(keep=True)  # the process died: its lock went with it
    return rec


def test_a_batch_run_drops_the_journals_of_vanished_scratch_copies_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, temp = tmp_path / "home", tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    temp = temp.resolve()
    gone = _left_journal(temp / "codemode-batch-k1ll3d00" / "work" / "r0")
    shutil.rmtree(temp / "codemode-batch-k1ll3d00")  # the scratch folder's removal ran
    alive = _left_journal(temp / "codemode-batch-st1llh3r" / "work" / "r1")
    running = _left_journal(temp / "codemode-batch-runn1ng0" / "work" / "r2", locked=True)
    shutil.rmtree(temp / "codemode-batch-runn1ng0")
    user = _left_journal(tmp_path / "moved-repo")  # a user's repository, moved away
    shutil.rmtree(tmp_path / "moved-repo")
    # A journal that says it is a vanished copy's but is named for another workspace.
    forged = home / "journal" / f"{journal.workspace_key(tmp_path / 'other')}-aaaaaaaaaaaa.journal"
    assert gone.path is not None
    forged.write_bytes(gone.path.read_bytes())
    forged.chmod(0o600)

    repo = tmp_path / "repos" / "r"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp_path / "s.js").write_text("return 1;\n")
    env = {**os.environ, "CODEMODE_HOME": str(home), "TMPDIR": str(temp)}
    done = interp("run", "s.js", "--repos", "repos", "--report", "r.jsonl", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr

    left = set(os.listdir(home / "journal"))
    assert gone.path is not None and gone.path.name not in left  # dropped
    for kept in (alive, running, user):
        assert kept.path is not None and kept.path.name in left, kept.path
    assert forged.name in left
    running.close(keep=True)
