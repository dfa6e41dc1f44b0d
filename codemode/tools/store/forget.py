"""Dropping the write journals of workspaces that are gone for good.

A batch worker killed inside its scratch copy leaves a journal (``journal.py``) for a
folder that is removed with its scratch folder: nothing can ever be rolled back into it,
and ``recover`` is only ever asked about folders that exist, so it would stay in
``$CODEMODE_HOME/journal`` forever. ``forget`` removes such journals, for the workspaces
its caller says are gone (``batch.scratch.vanished_copy``), never one a running commit
holds locked.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from codemode.tools.store import journal
from codemode.tools.store.journal_format import MAGIC


def forget(vanished: Callable[[Path], bool]) -> list[Path]:
    """Remove every journal, not locked by a running commit, whose workspace
    ``vanished`` says is gone for good (a batch copy whose scratch folder was removed);
    returns those workspaces. What nothing can be rolled back into is not kept."""
    forgotten: list[Path] = []
    try:
        names = os.listdir(journal.journal_dir())
    except OSError:
        return forgotten
    for name in names:
        if not name.endswith((journal.JOURNAL_SUFFIX, ".tmp")):
            continue
        path = journal.journal_dir() / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            workspace = _workspace_of(fd)
            # The name must be that workspace's key: a journal is never taken for
            # another's on the strength of what it says of itself.
            if workspace is None or not name.startswith(f"{journal.workspace_key(workspace)}-"):
                continue
            if not vanished(workspace):
                continue
            if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                os.unlink(path)
                forgotten.append(workspace)
        except OSError:
            continue  # locked: its commit is still running
        finally:
            os.close(fd)
    return forgotten


def _workspace_of(fd: int) -> Path | None:
    """The workspace a journal's header names (None: not a journal of this user)."""
    if not journal.own_file(fd):
        return None
    with os.fdopen(os.dup(fd), "rb") as source:
        magic = source.readline(256)
        header = source.readline(journal.MAX_JOURNAL_BYTES)
    if not magic.startswith(MAGIC):
        return None
    try:
        raw = json.loads(header).get("workspace")
    except (ValueError, AttributeError):
        return None
    return Path(raw) if isinstance(raw, str) and os.path.isabs(raw) else None
