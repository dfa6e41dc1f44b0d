"""Folders a confined command of this *or an earlier* session could have written.

A session's writable roots are known while it runs (``host_programs.register_roots``),
but what a command wrote there stays after the session ends: a ``bin/git`` planted in a
workspace, a hook script rewritten, a home folder's ``~/.local/bin`` filled while the home
was the workspace. So every root a session registers is also recorded, one real path a
line, in ``$CODEMODE_HOME/writable-roots``, and the launcher refuses anything under a
recorded root as it does under a live one. The rule (docs/sandbox.md): *a folder is
suspect from the first session that let commands write it until the person removes its
line from that file*; codemode's own home, cache and installation are exempt, because
every session keeps them read-only to commands (``sandbox.protection.own_paths``).

The record lives in codemode's home, which commands cannot write, so a program cannot
erase its own traces. Lines are appended with one ``O_APPEND`` write under a lock; a
root that no longer exists is skipped when read (nothing can be run from it) and
dropped when the file is compacted. A process reads the file again whenever it changed,
and checks only the lines appended since its last read when nothing before them changed
(a root removed meanwhile is then still listed until the next whole read: only
stricter).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from codemode.locations.user_dirs import cache_home, codemode_home

RECORD_FILE = "writable-roots"
# The file is rewritten without the roots that no longer exist past this size.
_COMPACT_BYTES = 64 * 1024

_lock = threading.Lock()
# path of the record -> (its identity when read, the roots it held, the text they were
# read from)
_read_cache: dict[str, tuple[tuple[int, int, int], tuple[str, ...], bytes]] = {}
# path of the record -> roots this process has recorded there (or found recorded)
_noted: dict[str, set[str]] = {}


def record_path() -> Path:
    return codemode_home() / RECORD_FILE


def record(roots: Iterable[str]) -> None:
    """Note ``roots`` (real paths) as written by commands, from now on for good. A
    failure to write is not fatal to the session: the live registry still covers it."""
    path = record_path()
    done = _noted.setdefault(str(path), set())
    roots = [r for r in roots if r not in done]
    if not roots:
        return  # (the common case: a session registering again, or another of this process)
    exempt = _exempt_set(str(codemode_home()), str(cache_home()))
    new = [r for r in roots if r and r != "/" and r not in exempt and os.path.isdir(r)]
    known = set(recorded())
    missing = [r for r in dict.fromkeys(new) if r not in known and "\n" not in r]
    done.update(r for r in roots if r not in missing)
    if not missing:
        return
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_locked(path)
        try:
            os.write(fd, "".join(r + "\n" for r in missing).encode("utf-8", "surrogateescape"))
            done.update(missing)
            if os.fstat(fd).st_size > _COMPACT_BYTES:
                _compact(path)
        finally:
            os.close(fd)  # (releases the lock)


def recorded() -> tuple[str, ...]:
    """Every recorded root that still exists (real paths)."""
    path = record_path()
    try:
        st = os.stat(path)
    except OSError:
        return ()
    ident = (st.st_ino, st.st_size, st.st_mtime_ns)
    with _lock:
        cached = _read_cache.get(str(path))
        if cached is not None and cached[0] == ident:
            return cached[1]
    try:
        data = path.read_bytes()
    except OSError:
        return ()
    # Whole lines are remembered as read; a last line without its newline (being
    # appended, or written by hand) is read now and again next time.
    whole = data[: data.rfind(b"\n") + 1]
    known: frozenset[str] = frozenset()
    if cached is not None and whole.startswith(cached[2]):
        # Appended to since (each session appends its new roots): only the new lines
        # are checked, not hundreds of old ones again before every program started.
        known, data = frozenset(cached[1]), data[len(cached[2]) :]
    text = data.decode("utf-8", "surrogateescape")
    found = {line for line in text.splitlines() if line.startswith("/") and os.path.lexists(line)}
    roots = tuple(sorted(known | found))
    with _lock:
        _read_cache[str(path)] = (ident, roots, whole)
    return roots


def exempt() -> tuple[str, ...]:
    """codemode's own state and installation: read-only to every command it runs."""
    key = (os.environ.get("CODEMODE_HOME"), os.environ.get("CODEMODE_CACHE"),
           os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))
    return _exempt_sorted(key)


@functools.lru_cache(maxsize=8)
def _exempt_sorted(key: tuple[str | None, ...]) -> tuple[str, ...]:
    # keyed by what the folders are computed from: the answer is asked for each check
    return tuple(sorted(_exempt_set(str(codemode_home()), str(cache_home()))))


@functools.lru_cache(maxsize=8)
def _exempt_set(home: str, cache: str) -> frozenset[str]:
    package = Path(__file__).resolve().parents[1]  # the codemode package
    places: list[str | Path] = [home, cache, sys.prefix, sys.base_prefix, package]
    return frozenset(os.path.realpath(p) for p in places)


def _open_locked(path: Path) -> int:
    """The record opened for appending and locked; reopened when a compaction renamed
    a new file into place while we waited (a line written to the old one is lost)."""
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except OSError:
            same = False
        if same:
            return fd
        os.close(fd)


def _compact(path: Path) -> None:
    # Called with the lock held: no append can land between the read and the rename.
    lines = path.read_bytes().decode("utf-8", "surrogateescape").splitlines()
    keep = sorted({line for line in lines if line.startswith("/") and os.path.lexists(line)})
    tmp = path.with_name(f".{RECORD_FILE}.{os.getpid()}")
    tmp.write_bytes("".join(r + "\n" for r in keep).encode("utf-8", "surrogateescape"))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
