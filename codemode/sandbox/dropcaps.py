"""The small static program that empties the capability sets of a command run as root.

bubblewrap run by root keeps the bounding set full (it only clears the other sets), so
the command, started holding nothing but CAP_SETPCAP, must empty it itself before it
runs. ``setpriv`` does that too, but its exec and dynamic loading cost about a
millisecond of every confined call; ``dropcaps.c`` does only that, statically linked.

It is compiled with the C compiler once per codemode home (keyed by a hash of its
source) into ``<codemode home>/helpers/``, the first time bubblewrap is probed. Where no
compiler works, ``path()`` is None and ``bwrap.isolation`` uses setpriv, as before.

What is executed must be exactly what was compiled. The codemode home is a protected
path (``protected.host_config_paths``): bound read-only for confined commands and
refused to the file tools when a workspace contains it, so no command can swap the
helper for a program that keeps the capabilities. And the file, and every folder down
to it, must belong to us (or root) and be writable by no one else, or it is not used.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from codemode.config_file import codemode_home

_SOURCE = "dropcaps.c"


def _source() -> bytes:
    return resources.files("codemode.sandbox").joinpath(_SOURCE).read_bytes()


@functools.cache
def _name() -> str:
    return f"dropcaps-{hashlib.sha256(_source()).hexdigest()[:16]}"


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


def _build(target: Path) -> bool:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / _SOURCE
        src.write_bytes(_source())
        out = Path(tmp) / "dropcaps"
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


def path() -> str | None:
    """The compiled helper (built now if needed), or None where it cannot be had.

    Looked up on each call (one stat when it is there): the codemode home can change
    within a process (``$CODEMODE_HOME``), and a helper that vanished must not be run."""
    target = codemode_home() / "helpers" / _name()
    if os.path.isfile(target):
        return _checked(target)
    _checked.cache_clear()  # (a rebuilt file is checked again)
    try:
        if not _build(target):
            return None
    except OSError:
        return None
    return _checked(target)


@functools.cache
def _checked(target: Path) -> str | None:
    return str(target) if _trusted(target) else None
