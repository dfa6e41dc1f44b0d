"""Walking a path from a root directory's file descriptor, one component at a time.

``Tree(roots).locate(path)`` returns a ``Spot``: an open descriptor of the directory
that holds the path's last component, plus that component's name. Each directory on
the way is opened relative to the previous one with ``O_NOFOLLOW | O_DIRECTORY``, so a
component swapped for a symlink after it was looked at makes the open fail (and the
step is retried) instead of leading elsewhere. A symlink found on the way is read and
its target walked the same way, but only while it stays inside one of the roots: a
relative target that climbs above its root, or an absolute one outside every root,
is refused. What is finally done with the spot (create, rename over, unlink, read)
uses the held descriptor, never the path again.

This is what ``openat2(RESOLVE_BENEATH)`` does in the kernel, done in user space so it
works on every kernel and can follow links from one writable root into another.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from codemode.tool_terms.errors import ToolError

# Why a path (its components below the root) may not be written, None if it may.
Refusal = Callable[[list[str]], str | None]

_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Symlinks followed in one walk before giving up, as the kernel's ELOOP limit.
_MAX_HOPS = 40
# Times one component is looked at again after it changed under the walk.
_MAX_RETRIES = 100


class Refused(ToolError):
    """The path may not be used: it leads outside the roots, or is protected."""


class Missing(FileNotFoundError):
    """A directory on the way does not exist (and was not to be created)."""


class Changed(ToolError):
    """The path kept changing while it was being walked."""


@dataclass
class Spot:
    """Where a path's last component lives: ``parent`` (an ``O_PATH`` descriptor of its
    directory, owned by the spot) and ``name``; ``real`` is the path with every
    symlink resolved, ``parts`` its components below ``root``."""

    parent: int
    name: str
    root: Path
    parts: list[str]

    @property
    def real(self) -> Path:
        return self.root.joinpath(*self.parts)

    def lstat(self) -> os.stat_result | None:
        try:
            return os.stat(self.name, dir_fd=self.parent, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def close(self) -> None:
        if self.parent >= 0:
            os.close(self.parent)
            self.parent = -1

    def __enter__(self) -> Spot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@cache
def default_mode() -> int:
    """Permission bits for new files: 0o666 less the process umask."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no /proc: read the umask by setting it, then put it back
    os.umask(mask)
    return 0o666 & ~mask


@dataclass
class Tree:
    """The directories a walk may not leave.

    ``roots`` None means the whole filesystem (reads; danger-full-access writes).
    ``follow`` False refuses every symlink on the way instead of following it (what
    /undo wants: it restores the paths it recorded, not wherever they point now).
    ``refuse`` is asked about every component walked (the file tools pass
    ``tools.fs.guard.write_refusal``: no ``.git`` or ``.codemode`` part).
    """

    roots: Sequence[Path] | None
    follow: bool = True
    refuse: Refusal | None = None
    _real_roots: list[Path] = field(init=False)

    def __post_init__(self) -> None:
        roots = [Path("/")] if self.roots is None else self.roots
        # Longest first, so a root nested in another is the one a path is taken under.
        resolved = {Path(os.path.realpath(r)) for r in roots}
        self._real_roots = sorted(resolved, key=lambda r: len(r.parts), reverse=True)

    def root_for(self, path: Path) -> tuple[Path, list[str]] | None:
        """The root ``path`` lies under (lexically) and its components below it."""
        path = Path(os.path.normpath(path))
        for root in self._real_roots:
            if path == root or path.is_relative_to(root):
                return root, list(path.relative_to(root).parts)
        return None

    def locate(
        self,
        path: Path,
        *,
        follow_last: bool = True,
        make_parents: bool = False,
        created: list[Path] | None = None,
        shown: str | Path | None = None,
    ) -> Spot:
        """Walk to ``path``'s last component; see the module docstring.

        ``follow_last`` follows a symlink in the last position too (to write through it
        to its target). ``make_parents`` creates missing directories, appending each
        one made to ``created``. Raises Refused, Missing (no such directory on the
        way), NotADirectoryError, or Changed.
        """
        shown = path if shown is None else shown
        found = self.root_for(path)
        if found is None:
            # Lexically outside every root: maybe a link from elsewhere into one.
            found = self.root_for(Path(os.path.realpath(path)))
        if found is None:
            raise Refused(f"refusing to write {shown}: outside the writable roots")
        root, pending = found
        if not pending:
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(shown))
        # The path as named is checked whole first (a missing folder on the way must
        # not hide a protected name below it), then every component as it is reached.
        self._check(root, pending, shown)
        # Only the directory being looked in is held (a path of any depth costs one
        # descriptor); ".." walks again from the root to the parent, strictly.
        cur = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
        parts: list[str] = []
        hops = retries = 0
        try:
            while pending:
                comp = pending.pop(0)
                if comp in ("", "."):
                    continue
                if comp == "..":
                    if not parts and root == Path("/"):
                        continue  # as the kernel does: /.. is /
                    if not parts:
                        raise Refused(
                            f"refusing to write {shown}: it leads outside the writable roots"
                        )
                    parts.pop()
                    os.close(cur)
                    cur = -1
                    cur = _reopen(root, parts, shown)
                    continue
                self._check(root, [*parts, comp], shown)
                last = not pending
                try:
                    st: os.stat_result | None = os.stat(comp, dir_fd=cur, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                    if not self.follow:
                        where = "/".join([*parts, comp])
                        raise Refused(f"refusing to write {shown}: {where} is a symlink now")
                    hops += 1
                    if hops > _MAX_HOPS:
                        raise Refused(f"{shown}: too many levels of symlinks")
                    try:
                        target = os.readlink(comp, dir_fd=cur)
                    except OSError:
                        retries = _bump(retries, shown)
                        pending.insert(0, comp)
                        continue
                    if target.startswith("/"):
                        landing = self.root_for(Path(target))
                        if landing is None:
                            link = "/".join([*parts, comp])
                            raise Refused(
                                f"refusing to write {shown}: it leads outside the writable "
                                f"roots (through the symlink {link} -> {target})"
                            )
                        os.close(cur)
                        cur = -1
                        root, below = landing
                        cur = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
                        parts = []
                        pending = [*below, *pending]
                    else:
                        pending = [*target.split("/"), *pending]
                    continue
                if last:
                    spot = Spot(cur, comp, root, [*parts, comp])
                    cur = -1  # the spot owns it now
                    return spot
                if st is None:
                    if not make_parents:
                        self._check(root, [*parts, comp, *pending], shown)
                        raise Missing(
                            errno.ENOENT, "no such directory", str(root.joinpath(*parts, comp))
                        )
                    try:
                        os.mkdir(comp, 0o777, dir_fd=cur)
                        if created is not None:
                            created.append(root.joinpath(*parts, comp))
                    except FileExistsError:
                        pass  # made meanwhile: look again
                    pending.insert(0, comp)
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    raise NotADirectoryError(
                        errno.ENOTDIR, "not a directory", str(root.joinpath(*parts, comp))
                    )
                try:
                    fd = os.open(comp, _DIR_FLAGS, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                        raise
                    # Swapped between the look and the open: look again.
                    retries = _bump(retries, shown)
                    pending.insert(0, comp)
                    continue
                os.close(cur)
                cur = fd
                parts.append(comp)
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(shown))
        finally:
            if cur >= 0:
                os.close(cur)

    def _check(self, root: Path, parts: list[str], shown: str | Path) -> None:
        if self.refuse is not None:
            reason = self.refuse(parts)
            if reason is not None:
                raise Refused(f"refusing to write {shown}: {reason}")


def _reopen(root: Path, parts: list[str], shown: str | Path) -> int:
    """The directory ``root/parts`` opened again, no symlink followed on the way."""
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in parts:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise Changed(f"{shown} changed while it was being opened; try again") from None
        raise
    return fd


def _bump(retries: int, shown: str | Path) -> int:
    if retries >= _MAX_RETRIES:
        raise Changed(f"{shown} kept changing while it was being opened; try again")
    return retries + 1


# --- what is done at a spot ----------------------------------------------------------


def tmp_name(name: str, tag: str) -> str:
    """The temporary file a write of ``name`` goes through (``tag``: the journal's, so
    that a killed write's leftover can be found and removed)."""
    # Short enough for any name: 255 bytes is the limit, and a name may be multibyte.
    return f".{name[:40]}.{tag}.tmp"


def write_atomic(
    spot: Spot, data: bytes, mode: int | None = None, *, tag: str | None = None
) -> bool:
    """Replace the spot's file with ``data`` (a temporary file renamed over it in the
    same held directory); returns True if it did not exist. ``mode`` None keeps an
    existing file's permission bits, not its set-user-ID or set-group-ID bit (else the
    umask default). ``tag`` names the temporary file (``tmp_name``), random when None."""
    old = spot.lstat()
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(spot.real))
    if mode is None:
        # (new bytes under a set-id bit would be a set-id program of whoever owns it:
        # the kernel drops both bits when a file is written, so does this)
        mode = (
            stat.S_IMODE(old.st_mode) & 0o777
            if old is not None and stat.S_ISREG(old.st_mode)
            else default_mode()
        )
    tmp = tmp_name(spot.name, tag or secrets.token_hex(4))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600, dir_fd=spot.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), mode)
        os.rename(tmp, spot.name, src_dir_fd=spot.parent, dst_dir_fd=spot.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=spot.parent)
        raise
    return old is None


def unlink(spot: Spot, name: str | None = None) -> None:
    """Remove the spot's entry (a symlink itself, never its target); ``name``: another
    entry of the same held folder (a temporary file beside it)."""
    os.unlink(spot.name if name is None else name, dir_fd=spot.parent)


def symlink(spot: Spot, target: str) -> None:
    """Create the symlink ``target`` at the spot (nothing may be there)."""
    os.symlink(target, spot.name, dir_fd=spot.parent)


def symlink_atomic(spot: Spot, target: str, tag: str) -> None:
    """Replace whatever entry is at the spot (a folder excepted) with the symlink
    ``target``: made at the temporary name ``tmp_name`` gives, then renamed over it."""
    tmp = tmp_name(spot.name, tag)
    os.symlink(target, tmp, dir_fd=spot.parent)
    try:
        os.rename(tmp, spot.name, src_dir_fd=spot.parent, dst_dir_fd=spot.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=spot.parent)
        raise


def mkdir(spot: Spot, mode: int = 0o777, *, exact: bool = False) -> None:
    """Create a folder at the spot (nothing may be there); ``exact`` gives it ``mode``
    whatever the umask, set on the new folder's descriptor."""
    os.mkdir(spot.name, mode, dir_fd=spot.parent)
    if exact:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(spot.name, flags, dir_fd=spot.parent)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


def rmdir(spot: Spot) -> None:
    os.rmdir(spot.name, dir_fd=spot.parent)
