"""Small static C programs the sandbox runs, compiled once per machine and user.

``dropcaps`` (root's capability drop) and ``subreaper`` (the command server's per-command
start) are compiled with the C compiler (keyed by a hash of their source) into
``helpers_dir()`` — ``$CODEMODE_CACHE/helpers``, by default ``~/.cache/codemode/helpers``:
build products, so they live with the caches and not in the codemode home, and a fresh
``$CODEMODE_HOME`` (a test, a CI job, a second profile) does not pay the ~60 ms compile
again. Where no compiler works, ``path()`` is None and the caller does without.

What is executed must be exactly what was compiled. The helpers folder is a protected
path (``protected.host_config_paths``): bound read-only for confined commands and
refused to the file tools when a workspace contains it, so no command can swap a
helper for a program that keeps the capabilities. It is created before the first
command runs, compiler or not, so that no command can plant a helper for a later
codemode to find. And the file, and every folder down to it, must belong to us (or
root) and be writable by no one else, or it is not used.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

# hashlib, importlib.resources, subprocess and tempfile are imported where a helper is
# looked up or built: protected.py imports ``helpers_dir`` for every session.


def helpers_dir() -> Path:
    """Where compiled helpers are kept: ``$CODEMODE_CACHE/helpers``, else
    ``$XDG_CACHE_HOME/codemode/helpers``, else ``~/.cache/codemode/helpers``."""
    cache = os.environ.get("CODEMODE_CACHE")
    if cache:
        return Path(cache).expanduser() / "helpers"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "codemode" / "helpers"


def _source(source: str) -> bytes:
    from importlib import resources

    return resources.files("codemode.sandbox").joinpath(source).read_bytes()


@functools.cache
def name(source: str) -> str:
    """The file name of ``source``'s (``dropcaps.c``) program: its stem and a hash."""
    import hashlib

    return f"{source.removesuffix('.c')}-{hashlib.sha256(_source(source)).hexdigest()[:16]}"


def _trusted(p: Path) -> bool:
    """``p`` and the folders above it belong to us or root and no one else may write them."""
    me = os.geteuid()
    try:
        for q in [p, *p.parents]:
            st = os.lstat(q)
            if stat.S_ISLNK(st.st_mode):
                if q == p:
                    return False  # the helper itself: never through a link
                st = os.stat(q)  # a linked folder (/tmp -> ...): judge where it leads
            if st.st_uid not in (me, 0):
                return False
            # a sticky folder (/tmp) lets no one else rename or remove what is ours
            sticky = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky:
                return False
    except OSError:
        return False
    return True


def _build(source: str, target: Path) -> bool:
    import shutil
    import subprocess
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / source
        src.write_bytes(_source(source))
        out = Path(tmp) / "program"
        for flags in (["-static"], []):  # static when libc.a is installed: cheaper exec
            try:
                proc = subprocess.run(
                    [cc, "-O2", *flags, "-o", str(out), str(src)],
                    capture_output=True,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired):
                return False
            if proc.returncode == 0:
                out.chmod(0o755)
                os.replace(out, target)  # atomic: never a half-written program
                return True
    return False


def path(source: str) -> str | None:
    """The program compiled from ``source`` (built now if needed), or None where it
    cannot be had.

    Looked up on each call (one stat when it is there): the cache folder can change
    within a process (``$CODEMODE_CACHE``), and a helper that vanished must not be run."""
    target = helpers_dir() / name(source)
    if os.path.isfile(target):
        return checked(target)
    checked.cache_clear()  # (a rebuilt file is checked again)
    try:
        # Made even when nothing can be compiled: a protected path that exists is bound
        # read-only, so no command can create a helper here for a later run to trust.
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _build(source, target):
            return None
    except OSError:
        return None
    return checked(target)


@functools.cache
def checked(target: Path) -> str | None:
    """``target`` if it may be run (``_trusted``); looked at once per path."""
    return str(target) if _trusted(target) else None
