"""Programs codemode itself starts on the host, found where no command could have put them.

``bwrap``, ``git``, the C compiler, ``setpriv``, ``node``, ``bash``: codemode runs these
with the user's full authority (bubblewrap even as root, before any confinement). A
``PATH`` that lists a folder inside a writable root (``./bin``, ``node_modules/.bin``,
a project's ``.venv/bin``) would let a command choose what they are. So a name is looked
up along ``PATH`` skipping every entry that is relative (the working folder) or lies
inside a writable root of a live session, and a candidate whose real path (after its
symlinks) lies inside one is skipped too. Sessions register their roots
(``register_roots``) before their first command; the registry is process-wide, and each
root is also recorded for later sessions (``written_roots``): what a command wrote there
is still there when the session has ended. codemode's own home, cache and installation
are exempt (every session keeps them read-only to commands). ``launcher`` starts what
is found here.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from codemode.locations import written_roots

_lock = threading.Lock()
_roots: dict[int, tuple[str, ...]] = {}
_tokens = itertools.count(1)
# Tokens to drop, dropped under the lock by the next reader or writer. Sessions
# unregister from a weakref finalizer, which the garbage collector can run inside any
# allocation, the lock's holder's too: taking the lock there would deadlock (a test
# process hung in writable_roots this way).
_ended: list[int] = []


def _drop_ended() -> None:
    while _ended:
        _roots.pop(_ended.pop(), None)


def register_roots(roots: Iterable[Path | str]) -> int:
    """Note folders commands may write; returns a token for ``unregister_roots``."""
    real = tuple(os.path.realpath(r) for r in roots)
    written_roots.record(real)
    with _lock:
        _drop_ended()
        token = next(_tokens)
        _roots[token] = real
    return token


def unregister_roots(token: int) -> None:
    """Forget a token's roots (safe from a finalizer: takes no lock)."""
    _ended.append(token)


# The last answer of ``writable_roots``: the live roots and the record it was made of
# (the record's tuple as ``written_roots.recorded`` keeps it while the file is unchanged).
_last: list[tuple[tuple[tuple[str, ...], ...], tuple[str, ...], tuple[str, ...]]] = []


def writable_roots() -> tuple[str, ...]:
    """Every folder a command could have written: the roots of live sessions and those
    recorded by earlier ones (real paths), sorted."""
    with _lock:
        _drop_ended()
        # A copy first: a finalizer run during the set's allocations only appends to
        # _ended, but the copy keeps this independent of that.
        live = tuple(_roots.values())
    recorded = written_roots.recorded()
    last = _last[:1]
    if last and last[0][0] == live and last[0][1] is recorded:
        return last[0][2]  # (asked before every program codemode starts: a record grows)
    found = tuple(sorted({r for rs in live for r in rs} | set(recorded)))
    _last[:] = [(live, recorded, found)]
    return found


def writable_root_of(path: str, roots: Iterable[str] | None = None) -> str | None:
    """The writable root ``path`` (as given, or after its symlinks) lies in, or None
    (the outermost, if several hold it); codemode's own state and installation are never
    in one (kept read-only)."""
    roots = writable_roots() if roots is None else tuple(roots)
    if not roots:
        return None
    exempt = written_roots.exempt()
    by_folder = _by_folder(roots)
    for p in dict.fromkeys((os.path.abspath(path), os.path.realpath(path))):
        if any(_under(p, e) for e in exempt):
            continue
        # Its folders from the top down, each looked up: as many steps as ``p`` is deep,
        # however many roots there are.
        parts = p.split("/")
        for depth in range(1, len(parts) + 1):
            root = by_folder.get("/".join(parts[:depth]))
            if root is not None:
                return root
    return None


@functools.lru_cache(maxsize=4)
def _by_folder(roots: tuple[str, ...]) -> dict[str, str]:
    """Each root by its path without a final slash ("" for "/")."""
    found: dict[str, str] = {}
    for r in roots:
        found.setdefault(r.rstrip("/"), r)
    return found


def inside_writable(path: str, roots: Iterable[str] | None = None) -> bool:
    """Whether ``path`` (as given, and after its symlinks) lies in a writable root."""
    return writable_root_of(path, roots) is not None


def _under(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip("/") + "/")


def host_program(name: str, path: str | None = None) -> str | None:
    """The absolute path of the program ``name`` outside every writable root, or None.

    ``name`` with a slash must be absolute and outside them itself. ``path`` defaults to
    ``$PATH``."""
    search = os.environ.get("PATH", "") if path is None else path
    roots = writable_roots()
    found = _lookup(name, search, roots)
    if found is not None and not _runnable(found):  # removed since it was looked up
        _lookup.cache_clear()
        found = _lookup(name, search, roots)
    return found


@functools.lru_cache(maxsize=64)
def _lookup(name: str, search: str, roots: tuple[str, ...]) -> str | None:
    if "/" in name:
        ok = os.path.isabs(name) and _runnable(name) and not inside_writable(name, roots)
        return name if ok else None
    for entry in search.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # "", "." and relative entries mean the working folder
        candidate = os.path.join(entry, name)
        if _runnable(candidate) and not inside_writable(candidate, roots):
            return candidate
    return None


def _runnable(p: str) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)
