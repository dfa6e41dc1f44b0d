"""Small static C programs the sandbox runs, compiled once per machine and user.

``dropcaps`` (root's capability drop) and ``subreaper`` (the command server's per-command
start) are compiled with the C compiler (keyed by a hash of their source) into
``helpers_dir()`` — ``$CODEMODE_CACHE/helpers``, by default ``~/.cache/codemode/helpers``:
build products, so they live with the caches and not in the codemode home, and a fresh
``$CODEMODE_HOME`` (a test, a CI job, a second profile) does not pay the ~60 ms compile
again. Where no compiler works, ``path()`` is None and the caller does without.

What is executed must be exactly what was compiled:

- the cache is codemode's own state (``own_paths``): a writable root that contains it
  keeps it read-only, with every folder above it pinned so that none can be renamed
  aside and replaced (bubblewrap), or is refused (Landlock); the file tools refuse it;
  it is created before the first command runs, compiler or not;
- a helper's digest is held in memory from the moment this process built it (or first
  accepted it) and checked before each use: the file's identity (device, inode, size,
  times) on each call, its sha256 whenever that changed. A helper that differs from the
  digest is never run again in this process;
- names carry a format version, so nothing an older codemode built (whose cache was not
  yet kept from commands) is run;
- the file, and every folder down to it, must belong to us (or root) and be writable by
  no one else.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
from pathlib import Path

from codemode.locations.host_programs import host_program
from codemode.locations.user_dirs import cache_home

# hashlib, importlib.resources, subprocess and tempfile are imported where a helper is
# looked up or built.

# Part of every helper's name: raised when what may be trusted in the cache changes
# (2: the cache became read-only to commands, with the folders above it).
FORMAT = 2
# path -> (identity when last checked, sha256): what this process built or accepted
_digests: dict[Path, tuple[tuple[int, ...], str]] = {}
_refused: set[Path] = set()
_lock = threading.Lock()
log = logging.getLogger("codemode.sandbox")


def helpers_dir() -> Path:
    """Where compiled helpers are kept: ``helpers`` in codemode's cache
    (``user_dirs.cache_home``)."""
    return cache_home() / "helpers"


def _source(source: str) -> bytes:
    from importlib import resources

    return resources.files("codemode.sandbox").joinpath(source).read_bytes()


@functools.cache
def name(source: str) -> str:
    """The file name of ``source``'s (``dropcaps.c``) program: its stem and a hash."""
    import hashlib

    digest = hashlib.sha256(_source(source)).hexdigest()[:16]
    return f"{source.removesuffix('.c')}-v{FORMAT}-{digest}"


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
    import subprocess
    import tempfile

    cc = host_program("cc") or host_program("gcc")
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
                digest = _sha256(out)
                os.replace(out, target)  # atomic: never a half-written program
                with _lock:
                    _digests[target] = (_identity(target), digest)
                return True
    return False


def path(source: str) -> str | None:
    """The program compiled from ``source`` (built now if needed), or None where it
    cannot be had (or what is there is not what this process built or first accepted).

    Looked up on each call (one stat when it is there): the cache folder can change
    within a process (``$CODEMODE_CACHE``), and a helper that vanished must not be run."""
    target = helpers_dir() / name(source)
    if os.path.isfile(target):
        return verified(target)
    try:
        # Made even when nothing can be compiled: a protected path that exists is bound
        # read-only, so no command can create a helper here for a later run to trust.
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _build(source, target):
            return None
    except OSError:
        return None
    return verified(target)


def verified(target: Path) -> str | None:
    """``target`` if it may be run: trusted (``_trusted``) and, once this process has
    seen it, unchanged (its identity, else its sha256, against the digest in memory)."""
    ident = _identity(target)
    with _lock:
        if target in _refused:
            return None
        known = _digests.get(target)
    if known is not None and known[0] == ident and ident:
        return str(target)
    if not _trusted(target):
        return None
    try:
        digest = _sha256(target)
    except OSError:
        return None
    with _lock:
        if known is not None and known[1] != digest:
            _refused.add(target)
            log.warning("sandbox: %s changed since it was built; not running it", target)
            return None
        _digests[target] = (ident, digest)
    return str(target)


def _identity(p: Path) -> tuple[int, ...]:
    try:
        st = os.lstat(p)
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _sha256(p: Path) -> str:
    import hashlib

    with open(p, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
