"""The folder a trusted hook's script loads from, covered by the hook's trust.

A hook's interpreter loads more than the file its command names. Python puts the
script's folder first on its module path (``import helper`` loads ``helper.py`` beside
it, and a ``json.py`` put there shadows the standard library's); Node resolves
``require('./x')`` from it; a script may source files beside it by its own path. A
confined command could write any of them, and the hook would run that code outside the
sandbox. So the trust of a hook covers the folder of each workspace file its command
names, as one entry of its trusted files: the folder's path with ``folder:`` and the
sha256 of its manifest (every entry below it: its path, its kind, a file's sha256, a
link's target). A changed, added or removed entry makes the hook untrusted again, the
manifest is taken again before each start (``changed``), and while a session runs the
hook the sandbox keeps the whole folder read-only (``sandbox.protection.hook_files``),
so no command adds a module to it in between.

A folder that cannot be kept that way is left out, and trusting says so
(``not_covered``): the workspace's top folder or a folder above it, a writable root
itself (keeping either would make the whole workspace read-only), one over
``MAX_ENTRIES`` entries or ``MAX_BYTES`` of files, or one holding anything but files,
folders and links that stay inside it, or a file with another name (a hard link: a
command could rewrite it through that name, read-only folder or not). The file the
command names stays covered by its own digest, as before (unless it has another name
too: then it cannot be trusted at all, ``trust``). Keeping hook scripts in a folder of their own
(``.codemode/hooks/``, Claude Code's ``.claude/hooks/``) is what makes this work.

``__pycache__`` folders are not in the manifest: Python writes them as a hook runs. A
hook instead gets ``PYTHONPYCACHEPREFIX`` (``PYCACHE_VARIABLE``), so the byte code its
Pythons load and write is in codemode's own cache, never a ``.pyc`` a command planted
beside a source. A ``.pyc`` outside ``__pycache__`` (Python loads one with no source) is
in the manifest like any file.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

PREFIX = "folder:"
# What one folder may hold to be covered: a hook's own folder is a few small scripts.
MAX_ENTRIES = 256
MAX_BYTES = 8 << 20
PYCACHE_VARIABLE = "PYTHONPYCACHEPREFIX"
_SKIPPED = "__pycache__"


class NotKept(Exception):
    """Why a folder cannot be covered (said when a hook is trusted). ``refuse``: the
    hook cannot be trusted at all while it holds (a hard link), rather than trusted
    without its folder."""

    def __init__(self, why: str, refuse: bool = False) -> None:
        super().__init__(why)
        self.refuse = refuse


def folder_for(named: str, top: Path | None, root_of: str | None) -> Path:
    """The folder the script ``named`` (a real path) loads from, when it can be kept;
    raises NotKept. ``top``: the workspace (resolved); ``root_of``: the writable root
    ``named`` lies in, if any."""
    folder = Path(named).parent
    if top is not None and (folder == top or top.is_relative_to(folder)):
        raise NotKept("it lies in the workspace's top folder")
    if root_of is not None and Path(os.path.realpath(root_of)) == folder:
        raise NotKept(f"it lies at the top of the writable root {root_of}")
    return folder


def manifest(folder: Path, keep: dict[str, bytes] | None = None) -> str:
    """``PREFIX`` and the sha256 of what ``folder`` holds; raises NotKept. ``keep``: filled
    with each file's content, by relative path, as it was hashed (what ``script_scan``
    reads is then what the manifest says)."""
    entries = sorted(_entries(folder))
    h = hashlib.sha256()
    for rel, kind, content in entries:
        h.update(f"{kind}\0{rel}\0".encode("utf-8", "surrogateescape"))
        h.update(_file_digest(folder / rel, keep, rel) if kind == "f" else content.encode(
            "utf-8", "surrogateescape"))
        h.update(b"\n")
    return PREFIX + h.hexdigest()


def _entries(folder: Path) -> Iterable[tuple[str, str, str]]:
    """(relative path, kind, link target) of each entry below ``folder``, links not
    followed; raises NotKept past the bounds or at an entry that cannot be kept."""
    real = Path(os.path.realpath(folder))
    count = size = 0
    stack = [""]
    found: list[tuple[str, str, str]] = []
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(folder / rel if rel else folder) as it:
                listed = list(it)
        except OSError as exc:
            raise NotKept(f"its folder cannot be read ({exc.strerror or exc})") from None
        for entry in listed:
            if entry.name == _SKIPPED:
                continue
            count += 1
            if count > MAX_ENTRIES:
                raise NotKept(f"its folder holds more than {MAX_ENTRIES} entries")
            path = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                found.append((path, "d", ""))
                stack.append(path)
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    raise NotKept(f"{path} in its folder has another name (a hard link), "
                                  "through which a command could rewrite it", refuse=True)
                size += st.st_size
                if size > MAX_BYTES:
                    raise NotKept(f"its folder holds more than {MAX_BYTES >> 20} MiB")
                found.append((path, "f", ""))
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(entry.path)
                if not Path(os.path.realpath(entry.path)).is_relative_to(real):
                    raise NotKept(f"{path} in its folder links out of it")
                found.append((path, "l", target))
            else:
                raise NotKept(f"{path} in its folder is neither a file, a folder nor a link")
    return found


def _file_digest(path: Path, keep: dict[str, bytes] | None = None, rel: str = "") -> bytes:
    # Not following a link, not blocking on a FIFO put in its place since the listing.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise NotKept(f"{path.name} in its folder cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotKept(f"{path.name} in its folder changed while it was read")
        h = hashlib.sha256()
        left = MAX_BYTES
        kept: list[bytes] = []
        for block in iter(lambda: f.read(1 << 20), b""):
            left -= len(block)
            if left < 0:  # (grown since the listing)
                raise NotKept(f"its folder holds more than {MAX_BYTES >> 20} MiB")
            h.update(block)
            if keep is not None:
                kept.append(block)
    if keep is not None:
        keep[rel] = b"".join(kept)
    return h.digest()


def is_folder(digest: str) -> bool:
    return digest.startswith(PREFIX)


def changed(trusted: Mapping[str, str]) -> list[str]:
    """The folders among ``trusted`` (a hook's trusted files) whose manifest is not the
    one trusted now."""
    out = []
    for path, want in trusted.items():
        if is_folder(want):
            try:
                now = manifest(Path(path))
            except NotKept:
                now = ""
            if now != want:
                out.append(path)
    return out


def pycache_prefix() -> Path:
    """Where hooks' Pythons keep byte code: in codemode's cache, which commands cannot
    write; made (0700) when missing."""
    from codemode.locations.user_dirs import cache_home

    folder = cache_home() / "hook-pycache"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # (named anyway: Python then writes none and reads none there)
    return folder
