"""A publish killed partway (``interpreter run --branch``) finished or undone at the next
start, as a patch killed partway is rolled back (``journal``).

Publishing commits a journal on a new branch, applies it to the working copy (through
the write-ahead journal), then moves HEAD to the branch and resets the index. A driver
killed between those steps left a branch nobody switched to, the changes applied on the
old branch, or HEAD moved with the old index. So before the branch is made, ``begin``
writes a marker beside the journals (``$CODEMODE_HOME/journal``, which no command can
write) naming the repository, the branch, its commit, the branch it started from and,
for each path the publish changes, what it held before and holds after
(``hostfs.fingerprint``); ``end`` removes it once HEAD and the index are the branch's (or
the publish undid itself). ``recover``, run at every start after the journals' own
rollback (so a half-applied copy is back to its before), decides by those paths:

- all as after: the apply finished, so the publish is finished (HEAD to the branch, the
  index reset to it): the whole after;
- all as before: the apply never happened, or was rolled back, so HEAD stays (or goes
  back) on the branch it started from and the branch is removed, if it still names the
  commit made: the whole before. A branch already pushed stays on the remote; the line
  says so;
- neither (someone changed them since): nothing is touched, and the line says what to do.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codemode.hostfs.beneath import Missing
from codemode.hostfs.fingerprint import of_bytes
from codemode.hostfs.writer import Writer
from codemode.locations import launcher
from codemode.sandbox.git.git_overrides import SAFE_GIT
from codemode.sandbox.git.repo_config import clean_env
from codemode.tool_terms.errors import ToolError
from codemode.tools.store.journal import journal_dir, open_dir, own_file, workspace_key

SUFFIX = ".publish"
_MOST = 256 << 20  # a marker of a million paths: anything larger is not ours
# What one decision reads of the repository's files, all paths together: a publish's
# files were held in memory (a batch journal's, ``JOURNAL_BYTES``, their bases as much),
# so files that hold more are not what it wrote, and a program's 50 GB sparse file at a
# published path must not be hashed at every start.
_MOST_READ = 2 << 30

# (path relative to the repository, its fingerprint before, after; None: nothing there)
Path3 = tuple[str, str | None, str | None]


def _path(repo: Path) -> Path:
    return journal_dir() / f"{workspace_key(repo)}{SUFFIX}"


def begin(repo: Path, *, ref: str, commit: str, start_ref: str, push: str | None,
          paths: Sequence[Path3]) -> None:  # fmt: skip
    """Write the marker (whole, then renamed into place) before the branch is made."""
    folder = open_dir()
    data = json.dumps({"version": 1, "repo": os.path.realpath(repo), "ref": ref,
                       "commit": commit, "start_ref": start_ref, "push": push,
                       "paths": [list(p) for p in paths]}).encode()  # fmt: skip
    tmp = folder / f".{workspace_key(repo)}.{os.getpid()}.publish-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, _path(repo))


def end(repo: Path) -> None:
    """The publish finished, or undid itself: nothing to recover."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(repo))


def _read(repo: Path) -> dict[str, Any] | None:
    try:
        fd = os.open(_path(repo), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not own_file(fd) or os.fstat(fd).st_size > _MOST:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            found = json.loads(f.read(_MOST + 1))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    keys = ("repo", "ref", "commit", "start_ref")
    if not isinstance(found, dict) or not all(isinstance(found.get(k), str) for k in keys):
        return None
    paths = found.get("paths")
    if (
        found["repo"] != os.path.realpath(repo)
        or not isinstance(paths, list)
        or not all(isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) for p in paths)
    ):
        return None
    return found


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return launcher.run([*SAFE_GIT, *args], cwd=repo, capture_output=True, env=clean_env(),
                        timeout=300, names_files=False)  # fmt: skip


def _head(repo: Path) -> str:
    return _git(repo, "symbolic-ref", "-q", "HEAD").stdout.decode(errors="replace").strip()


def _all_as(repo: Path, paths: list[list[str | None]], after: bool) -> bool:
    """Whether every path holds what it held before the publish (or will after it),
    each looked at by descriptor from the repository with no link followed: a link a
    program put on the way (``src`` -> a folder holding the published bytes) is not
    what the publish wrote, and says neither."""
    writer = Writer(repo)
    budget = [_MOST_READ]
    for rel, before, later in paths:
        try:
            if _held(writer, str(rel), budget) != (later if after else before):
                return False
        except (OSError, ToolError):
            return False
    return True


def _held(writer: Writer, rel: str, budget: list[int]) -> str | None:
    """What ``hostfs.fingerprint`` says of ``rel``, read through the held folder (a
    FIFO or device swapped in is not read), ``budget`` bytes at most in all."""
    try:
        spot = writer.spot(rel)
    except (Missing, NotADirectoryError):
        return None
    with spot:
        st = spot.lstat()
        if st is None or stat.S_ISDIR(st.st_mode):
            return None
        if stat.S_ISLNK(st.st_mode):
            return of_bytes(os.fsencode(os.readlink(spot.name, dir_fd=spot.parent)), True)
        if not stat.S_ISREG(st.st_mode):
            return "other"
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(spot.name, flags, dir_fd=spot.parent)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "other"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise OSError(errno.EFBIG, "more than a publish writes", rel)
            digest.update(chunk)
        return "file:" + digest.hexdigest()
    finally:
        os.close(fd)


def recover(repo: Path) -> list[str]:
    """Finish or undo a publish killed partway in ``repo``; the lines to say (none when
    there was nothing to do). Never raises for a git that fails: says so."""
    if not os.path.lexists(_path(repo)):
        return []
    found = _read(repo)
    if found is None:
        end(repo)  # not a marker of ours for this repository
        return []
    ref, commit, paths = found["ref"], found["commit"], found["paths"]
    branch = ref.removeprefix("refs/heads/")
    try:
        if _all_as(repo, paths, after=True):
            _git(repo, "symbolic-ref", "HEAD", ref).check_returncode()
            _git(repo, "reset", "-q", "--no-refresh").check_returncode()
            end(repo)
            return [f"codemode: finished a publish that was interrupted: {branch} is checked "
                    "out, its changes committed."]  # fmt: skip
        if _all_as(repo, paths, after=False):
            if _head(repo) == ref:
                _git(repo, "symbolic-ref", "HEAD", found["start_ref"]).check_returncode()
            _git(repo, "update-ref", "-d", ref, commit)  # only if it still names ours
            end(repo)
            pushed = (f" (it may have been pushed to {found['push']}: remove it there too)"
                      if found.get("push") else "")  # fmt: skip
            return [
                f"codemode: undid a publish that was interrupted before its changes were "
                f"applied: branch {branch} removed{pushed}."
            ]
    except (launcher.LaunchRefused, OSError, subprocess.SubprocessError) as exc:
        return [f"codemode: could not finish or undo an interrupted publish of {branch} "
                f"({exc}); the next start tries again."]  # fmt: skip
    return [
        f"codemode: a publish of {branch} was interrupted and its files changed since: "
        f"nothing was touched; check out {branch} or remove it, then delete "
        f"{_path(repo)}."
    ]
