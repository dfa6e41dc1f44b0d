"""The isolated copy a repository's script runs in.

A batch script never runs in the repository itself: it runs in a copy, and what it
changed there comes back as a journal (``changes.py``) that the driver applies to the
repository all or nothing. A script that fails, a worker that dies and a Ray task that
is retried all leave the repository exactly as it was, whatever wrote the files (file
tools, commands, or programs those commands started).

The copy holds every file and symlink of the working copy, timestamps and modes kept
(so comparing stat results finds the unchanged ones cheaply). A git repository's
``.git`` is copied except its object store, which the copy borrows through git's own
``objects/info/alternates``: the objects are immutable, git in the copy reads them
from the original and writes new ones into the copy. Its ``hooks`` folder is left out:
git commands a script runs in the copy run no hook of the repository's. FIFOs, sockets
and devices are not copied.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

VCS_DIRS = frozenset({".git", ".hg", ".svn", ".jj"})


def make_copy(source: Path, dest: Path) -> None:
    """Copy the working copy at ``source`` to ``dest`` (which must not exist)."""
    dest.mkdir(parents=True)
    shutil.copystat(source, dest)
    for entry in os.scandir(source):
        target = dest / entry.name
        if entry.name == ".git" and entry.is_dir(follow_symlinks=False):
            _copy_git_dir(Path(entry.path), target)
        else:
            _copy_entry(entry, target)


def _copy_tree(source: Path, dest: Path, skip: frozenset[str] = frozenset()) -> None:
    dest.mkdir()
    for entry in os.scandir(source):
        if entry.name not in skip:
            _copy_entry(entry, dest / entry.name)
    shutil.copystat(source, dest)


def _copy_entry(entry: os.DirEntry[str], target: Path) -> None:
    mode = entry.stat(follow_symlinks=False).st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(entry.path), target)
    elif stat.S_ISDIR(mode):
        _copy_tree(Path(entry.path), target)
    elif stat.S_ISREG(mode):
        shutil.copy2(entry.path, target, follow_symlinks=False)
    # FIFOs, sockets and devices: nothing a script edits, and copying one could block.


def _copy_git_dir(source: Path, dest: Path) -> None:
    _copy_tree(source, dest, skip=frozenset({"objects", "hooks"}))
    info = dest / "objects" / "info"
    info.mkdir(parents=True)
    (dest / "objects" / "pack").mkdir()
    (info / "alternates").write_text(str((source / "objects").resolve()) + "\n")
