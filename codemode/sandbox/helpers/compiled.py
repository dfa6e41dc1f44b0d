"""Small static C programs codemode runs, compiled once per machine and user.

``dropcaps`` (root's capability drop) and ``subreaper`` (the command server's per-command
start), both here, and ``warm_client`` (the compiled client of the warm server, beside it
in ``codemode/warm/``; ``SOURCES`` names each source's package) are compiled with the C
compiler (keyed by a hash of their source) into ``helpers_dir()`` —
``$CODEMODE_CACHE/helpers``, by default ``~/.cache/codemode/helpers``: build products,
so they live with the caches and not in the codemode home, and a fresh
``$CODEMODE_HOME`` (a test, a CI job, a second profile) does not pay the ~60 ms compile
again. Where no compiler works, ``path()`` is None and the caller does without.

What is executed must be exactly what was compiled:

- the cache is codemode's own state (``own_paths``): a writable root that contains it
  keeps it read-only, with every folder above it pinned so that none can be renamed
  aside and replaced (bubblewrap), or is refused (Landlock); the file tools refuse it;
  it is created before the first command runs, compiler or not;
- across processes, a helper is run only if it matches the digest recorded when it was
  compiled: ``NAME.sha256`` beside it (the sha256 of the program, keyed by the hash of
  its source and the format), written only into a cache folder that passes the checks
  below. A later process re-hashes the program (about a millisecond) before its first
  use; a program without a record, or that differs from it, is compiled again in its
  place, never run. A swap made between two processes is so undone;
- within a process, the digest is held in memory from the moment this process built it
  (or first accepted it) and checked before each use: the file's identity (device,
  inode, size, times) on each call, its sha256 whenever that changed. A helper that
  differs from the digest is never run again in this process;
- names carry a format version, so nothing an older codemode built (whose cache was not
  yet kept from commands, or had no records) is run;
- the file, its record and every folder down to them must belong to us (or root) and
  be writable by no one else.

A build also removes the helpers (and records) of older formats from its folder, once
they are a day old (``_remove_older_formats`` says why that is safe).

What this does not cover: a process with the user's full authority (a command under
``danger-full-access``, anything outside codemode) can rewrite a program and its record
together, as it could rewrite codemode itself; docs/sandbox.md has the threat model.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import stat
import threading
import time
from pathlib import Path

from codemode.locations.host_programs import host_program
from codemode.locations.user_dirs import cache_home

# hashlib, importlib.resources, subprocess and tempfile are imported where a helper is
# looked up or built.

# Part of every helper's name: raised when what may be trusted in the cache changes
# (2: the cache became read-only to commands, with the folders above it; 3: a digest
# record beside each helper).
FORMAT = 3
# A record is a few hundred bytes; anything larger is not one of ours.
_MAX_RECORD = 4096
# path -> (identity when last checked, sha256): what this process built or accepted
_digests: dict[Path, tuple[tuple[int, ...], str]] = {}
_refused: set[Path] = set()
# A helper's name in any format: ``stem-HASH`` (format 1, unversioned), ``stem-vN-HASH``,
# and its ``.sha256`` record.
_HELPER_NAME = re.compile(r"[a-z0-9_]+(?:-v([0-9]+))?-[0-9a-f]{16}(?:\.sha256)?")
# Older-format helpers younger than this are left alone (``_remove_older_formats``).
OLD_FORMAT_GRACE_S = 24 * 3600
_lock = threading.Lock()
log = logging.getLogger("codemode.sandbox")


def helpers_dir() -> Path:
    """Where compiled helpers are kept: ``helpers`` in codemode's cache
    (``user_dirs.cache_home``)."""
    return cache_home() / "helpers"


# Every source compiled here, and the package it lives in (read as a resource, never
# imported): a program's record names its source by the program's name, so a name this
# table lacks is never built, accepted or run.
SOURCES = {
    "dropcaps.c": "codemode.sandbox.helpers",
    "subreaper.c": "codemode.sandbox.helpers",
    "warm_client.c": "codemode.warm",
}


def _source(source: str) -> bytes:
    from importlib import resources

    package = SOURCES.get(source)
    if package is None:
        raise FileNotFoundError(f"no C source {source!r} among codemode's helpers")
    return resources.files(package).joinpath(source).read_bytes()


@functools.cache
def _source_digest(source: str) -> str:
    import hashlib

    return hashlib.sha256(_source(source)).hexdigest()


@functools.cache
def name(source: str) -> str:
    """The file name of ``source``'s (``dropcaps.c``) program: its stem and a hash."""
    return f"{source.removesuffix('.c')}-v{FORMAT}-{_source_digest(source)[:16]}"


def record_path(target: Path) -> Path:
    """Where the digest of the program ``target`` was recorded when it was compiled."""
    return target.with_name(target.name + ".sha256")


def record(source: str, digest: str, compiler: str) -> bytes:
    """The record of a program compiled from ``source`` whose sha256 is ``digest``."""
    fields = {"format": FORMAT, "source": _source_digest(source), "sha256": digest,
              "compiler": compiler}  # fmt: skip
    return json.dumps(fields, sort_keys=True).encode() + b"\n"


def _recorded(target: Path) -> str | None:
    """The sha256 recorded for ``target`` when it was compiled, or None: no record, one
    that is not ours (owner, mode, size, form), or one for another source or format."""
    source = target.name.partition("-v")[0] + ".c"
    try:
        if name(source) != target.name:
            return None
    except OSError:  # no such helper
        return None
    path = record_path(target)
    if not _trusted(path):
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_RECORD + 1)
        fields = json.loads(data) if len(data) <= _MAX_RECORD else None
    except (OSError, ValueError):
        return None
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        return None
    if fields.get("source") != _source_digest(source):
        return None
    digest = fields.get("sha256")
    return digest if isinstance(digest, str) and len(digest) == 64 else None


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


# The builds tried, first that compiles kept: static where libc.a is installed (a
# cheaper exec). A helper run for every command (``subreaper.c``) is tried first with
# no C library at all (its source says how): no libc start-up, a few KiB to map.
_NOLIBC = ("-DCODEMODE_NOLIBC", "-static", "-nostdlib", "-ffreestanding",
           "-fno-stack-protector", "-fno-pie", "-no-pie")  # fmt: skip
_DEFAULT_BUILDS: tuple[tuple[str, ...], ...] = (("-static",), ())
_BUILDS = {"subreaper.c": (_NOLIBC, *_DEFAULT_BUILDS)}


def _runs(program: Path) -> bool:
    """Whether a helper built without the C library runs a command and passes on its
    exit status (``helper /bin/sh -c 'exit 7'``); else the next build is tried."""
    import subprocess

    from codemode.locations import launcher

    try:
        done = launcher.run([str(program), "/bin/sh", "-c", "exit 7"], timeout=10,
                            capture_output=True, names_files=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 7


def _build(source: str, target: Path) -> bool:
    import subprocess
    import tempfile

    from codemode.locations import launcher

    cc = host_program("cc") or host_program("gcc")
    if cc is None:
        return False
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / source
        src.write_bytes(_source(source))
        out = Path(tmp) / "program"
        for flags in _BUILDS.get(source, _DEFAULT_BUILDS):
            try:
                # (the source and output are our own temporary files)
                proc = launcher.run(
                    [cc, "-O2", *flags, "-o", str(out), str(src)], names_files=False,
                    capture_output=True,
                    timeout=60,
                )
            except (OSError, subprocess.TimeoutExpired):
                return False
            if proc.returncode == 0 and (flags is not _NOLIBC or _runs(out)):
                out.chmod(0o755)
                digest = _sha256(out)
                if _trusted(target.parent):  # else no record: no later process runs it
                    note = Path(tmp) / "record"
                    note.write_bytes(record(source, digest, cc))
                    note.chmod(0o444)
                    # the record first: a program is never there without its own
                    os.replace(note, record_path(target))
                os.replace(out, target)  # atomic: never a half-written program
                with _lock:
                    _digests[target] = (_identity(target), digest)
                _remove_older_formats(target.parent)
                return True
    return False


def _remove_older_formats(folder: Path, now: float | None = None) -> list[str]:
    """Remove the helpers and records of formats older than ``FORMAT`` from ``folder``
    (an upgrade leaves them there for good otherwise); returns the names removed.

    Only regular files of ours with a helper's name, and only once they were last
    written more than ``OLD_FORMAT_GRACE_S`` ago. Why that is safe while an older
    codemode may still run: a program already started is not affected (its file is
    only unlinked); and every codemode version looks its helper up by name on each
    command and compiles it again when it is gone, so an older process that still uses
    one pays one compile (and only a command it starts in the instant between its
    lookup and its exec fails, with an error; nothing runs unconfined). A file of an
    older format written in the last day means an older version compiled it again
    lately, so is still at work here: it is left for a later build. Newer formats are
    never touched."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        for entry in os.scandir(fd):
            found = _HELPER_NAME.fullmatch(entry.name)
            if found is None or (found[1] is not None and int(found[1]) >= FORMAT):
                continue
            try:
                st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                if now - st.st_mtime <= OLD_FORMAT_GRACE_S:
                    continue
                os.unlink(entry.name, dir_fd=fd)
                removed.append(entry.name)
            except OSError:
                continue
    finally:
        os.close(fd)
    if removed:
        log.info("sandbox: removed %d old-format helper file(s) from %s", len(removed), folder)
    return removed


def path(source: str) -> str | None:
    """The program compiled from ``source`` (built now if needed), or None where it
    cannot be had (or what is there is not what this process built or first accepted).

    Looked up on each call (one stat when it is there): the cache folder can change
    within a process (``$CODEMODE_CACHE``), and a helper that vanished must not be run."""
    target = helpers_dir() / name(source)
    if os.path.isfile(target):
        found, unrecorded = _check(target)
        if not unrecorded:
            return found
        # Not what codemode compiled (no record, or one it does not match), in a folder
        # only we may write: compiled again in its place, never run.
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
    """``target`` if it may be run: trusted (``_trusted``) and unchanged: against the
    digest in memory once this process has seen it (its identity, else its sha256),
    before that against the digest recorded when it was compiled."""
    return _check(target)[0]


def _check(target: Path) -> tuple[str | None, bool]:
    """``verified``'s answer, and whether ``target`` is refused only for not matching
    its record (a trusted file in a trusted folder: compiling it again is safe)."""
    ident = _identity(target)
    with _lock:
        if target in _refused:
            return None, False
        known = _digests.get(target)
    if known is not None and known[0] == ident and ident:
        return str(target), False
    if not _trusted(target):
        return None, False
    try:
        digest = _sha256(target)
    except OSError:
        return None, False
    if known is None and digest != _recorded(target):
        log.info("sandbox: %s is not what codemode compiled; not running it", target)
        return None, True
    with _lock:
        if known is not None and known[1] != digest:
            _refused.add(target)
            log.warning("sandbox: %s changed since it was built; not running it", target)
            return None, False
        _digests[target] = (ident, digest)
    return str(target), False


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
