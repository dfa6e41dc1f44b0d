"""The workspace files trusted hooks run, kept from commands as codemode's own paths are.

A trusted hook's command line may name files a command could write (``sh
scripts/guard.sh`` in the workspace); the person accepted their sha256, and that of the
folder each loads from (``hooks.script_folders``), and the launcher hashes them again
just before each start. The hook's interpreter then opens them by
path, after that check, and a shell reads its script as it goes: a confined command
running meanwhile (a program's ``Promise.all``) could rename its own file over one of
them, or rewrite it, and the hook would run the program's code unconfined. So while a
session runs hooks trusted with such files, the sandbox keeps those files as it keeps
codemode's own (``own_paths``): each file and folder bound read-only (no module added
beside a script), every folder between its root and it bound onto itself (no rename
puts another in its place), and the file tools refuse them. Nothing useful is lost: a
trusted file a command changed stops its hook until the person trusts it again.

Landlock cannot make part of a writable root read-only, so under it these files are not
kept (the race stays: docs/hooks.md says so) rather than the whole workspace refused.

Held by owner (a session's ``HookEngine``), weakly: a session that ends lets go of its
files. A command started before the files were held (trust given during the session)
keeps running without them held; every command after holds them.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path

WHAT = "a file a trusted hook runs, or the folder it loads from (its trust covers this content)"

_HELD: weakref.WeakKeyDictionary[object, tuple[Path, ...]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def hold(owner: object, paths: Iterable[str | Path]) -> None:
    """``owner``'s hooks run ``paths``, files and folders (as they were trusted: real,
    absolute paths); replaces what ``owner`` held before."""
    found = tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in paths))
    with _LOCK:
        if found:
            _HELD[owner] = found
        else:
            _HELD.pop(owner, None)


def held() -> tuple[Path, ...]:
    """Every file and folder some live owner's hooks run, each once, in a stable order."""
    with _LOCK:
        every = [p for paths in _HELD.values() for p in paths]
    return tuple(sorted(dict.fromkeys(every)))
