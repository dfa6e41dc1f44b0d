"""A check after each confined command: git's protected files are as they were.

bubblewrap keeps the protected parts of a git directory read-only (``bwrap.protect_binds``)
but cannot hold a place for a file that does not exist yet without creating it, and an
empty ``commondir`` or ``config`` would break git. So before the command the guard notes
which of them are absent, and afterwards removes any the command created.

Landlock cannot make a part of a writable root read-only at all. There the guard keeps a
copy of every protected entry (``.codemode/`` at the root, ``.git`` itself, and
``config``, ``config.worktree``, ``commondir``, ``hooks/``, ``info/`` of each git
directory) and puts back whatever the command changed, before anything on the host can
run git again. Each repair is reported in the command's output.

Every rename, removal and restore goes through the host-side writer
(``codemode.hostfs.writer``), from the writable root's descriptor with no link
followed: another command of the session may still be running (``Promise.all``) and
swap a folder on the way for a link at any moment.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codemode.hostfs.writer import Writer, writer_at
from codemode.sandbox.protection import user_trust
from codemode.sandbox.protection.own_paths import links
from codemode.sandbox.protection.protected import (
    CODEMODE_DIR,
    GIT_DIR,
    GIT_PROTECTED,
    git_dirs,
)
from codemode.tool_terms.errors import ToolError

# A copy larger than this is not kept: the entry is then only checked, not restored.
_MAX_COPY_BYTES = 4 << 20
# Nor one deeper than this, or of more entries: a command shapes the tree a repair
# copies, and a chain thousands of folders deep would end the (recursive) copy in
# RecursionError and cost the square of its depth; no hooks/, info/ or .codemode/ a
# user keeps comes near either.
_MAX_COPY_DEPTH = 32
_MAX_COPY_ENTRIES = 10_000
_MUST_STAY_ABSENT = ("config", "config.worktree", "commondir")

# what an entry was: None (absent), bytes (a file), str (a symlink's target),
# dict (a folder: name -> same), or "?" (too large to copy)
Copy = bytes | str | dict[str, "Copy"] | None


@dataclass
class GuardState:
    full: bool
    copies: dict[Path, Copy] = field(default_factory=dict)
    identities: dict[Path, tuple[int, int, int] | None] = field(default_factory=dict)
    # the git directories there were, and where to look for new ones (Landlock: a
    # command can make ``.git/modules/lib`` with hooks for ``git submodule update``)
    gitdirs: set[Path] = field(default_factory=set)
    repos: list[Path] = field(default_factory=list)
    # a root contains the home: its entries then (a new dot-entry is set aside)
    home: tuple[Path, frozenset[str]] | None = None
    # the writable roots: every write starts from one of them
    roots: list[Path] = field(default_factory=list)


def take(
    roots: Sequence[Path],
    *,
    full: bool,
    extra: Sequence[Path] = (),
    nested: Sequence[Path] = (),
) -> GuardState:
    """Note the protected entries of ``roots`` and the git directories of the
    repositories at ``nested`` (copies of them, and of ``extra``, when ``full``)."""
    state = GuardState(full, repos=[*roots, *nested], roots=list(roots))
    budget = [_MAX_COPY_BYTES]
    h = user_trust.holds_home(roots)
    if h is not None:
        with contextlib.suppress(OSError):
            state.home = (h, frozenset(os.listdir(h)))
    for p in extra:  # .codemode/ below the tops, work-tree files git's config names
        if full:
            state.copies[p] = _copy(p, budget)
        elif not os.path.lexists(p):
            state.copies[p] = None  # bubblewrap binds what exists; this must stay absent
    for root in roots:
        if full:
            gitp, cm = root / GIT_DIR, root / CODEMODE_DIR
            state.identities[gitp] = _identity(gitp)
            state.copies[cm] = _copy(cm, budget)
            if not gitp.is_dir() or gitp.is_symlink():
                state.copies[gitp] = _copy(gitp, budget)  # a "gitdir:" file, or absent
    # codemode's own paths in a root that a mount cannot hold: a dotfile that is a
    # symlink (its target is bound read-only), one not made yet (``own_paths``)
    for p in links(roots):
        state.copies[p] = _copy(p, budget)
    for root in [*roots, *nested]:
        for gitdir in git_dirs(root):
            state.gitdirs.add(gitdir)
            for name in GIT_PROTECTED:
                p = gitdir / name
                if full:
                    state.copies[p] = _copy(p, budget)
                elif name in _MUST_STAY_ABSENT and not os.path.lexists(p):
                    state.copies[p] = None
    return state


def repair(state: GuardState) -> list[str]:
    """Undo what the command changed among the noted entries; one line per repair."""
    notes: list[str] = []
    gone: list[Path] = []
    for p, ident in state.identities.items():
        if ident is None or not stat.S_ISDIR(ident[2]):
            continue  # absent or a file: compared with its copy below
        now = _identity(p)
        if now is not None and now[:2] == ident[:2] and stat.S_ISDIR(now[2]):
            continue
        if now is not None:
            notes.append(_quarantine(p, state.roots))
        original = _find_moved(p.parent, ident)
        if original is not None and _move_back(original, p, state.roots):
            notes.append(f"the command moved {p} to {original.name}; moved it back")
        else:
            gone.append(p)
            notes.append(f"the command removed or moved {p}, and it was not found again")
    seen: dict[Path, bool] = {}  # folder -> is now a symlink or no folder
    for p, before in state.copies.items():
        if before == "?" or any(p.is_relative_to(g) for g in gone):
            continue
        swapped = _symlinked_parent(p, seen)
        if swapped is not None:
            # never write through it: it could lead anywhere on the host
            notes.append(_quarantine(swapped, state.roots))
            seen.clear()  # moved aside: look again
        if _copy(p, [_MAX_COPY_BYTES]) == before:
            continue
        try:
            writer, rel = writer_at(p, state.roots)
            _restore(writer, rel, p, before)
        except (OSError, ToolError) as exc:
            notes.append(f"the command changed {p}, which could not be put back: {exc}")
            continue
        what = "created" if before is None else "changed"
        notes.append(
            f"the command {what} {p}; put back as it was (git or codemode would run or "
            "read it later, outside the sandbox)"
        )
    if state.full:
        notes += _new_gitdirs(state)
    if state.home is not None:
        notes += [_set_aside_new(p, state.roots) for p in user_trust.new_entries(*state.home)]
    return notes


def _move_back(original: Path, p: Path, roots: list[Path]) -> bool:
    """Rename ``original`` back to ``p`` (the same folder), never over anything."""
    try:
        writer, rel = writer_at(original, roots)
        writer.rename(rel, p.name)
    except (OSError, ToolError):
        return False
    return True


def _set_aside_new(p: Path, roots: list[Path]) -> str:
    """Move a dot-entry a command added to the home aside (``user_trust``)."""
    try:
        writer, rel = writer_at(p, roots)
        dest = writer.set_aside(rel, user_trust.REFUSED_MARK)
    except FileNotFoundError:
        return f"the command created {p}, which is gone again"
    except (OSError, ToolError) as exc:
        return f"the command created {p}, which could not be moved aside: {exc}"
    return (
        f"the command created {p}; moved it to {dest} (the home's dot-entries are "
        "read-only: your shell, ssh, git, editors and agents read them on the host)"
    )


def _new_gitdirs(state: GuardState) -> list[str]:
    """Set aside git directories a command made inside a git directory (a submodule's
    under ``modules/``, a worktree's) that would make git run something."""
    from codemode.sandbox.git import git_sanity

    notes = []
    for root in state.repos:
        for gitdir in list(git_dirs(root)):
            if gitdir in state.gitdirs:
                continue
            why = git_sanity.unsafe_reason(gitdir, state.repos)
            if why is not None:
                notes.append(_quarantine(gitdir, state.roots) + f" ({why})")
    return notes


def _find_moved(parent: Path, ident: tuple[int, int, int]) -> Path | None:
    """The entry of ``parent`` that is the folder ``ident`` names (after ``mv .git .g``)."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return None
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == ident[:2] and stat.S_ISDIR(st.st_mode):
            return Path(e.path)
    return None


def _symlinked_parent(p: Path, seen: dict[Path, bool]) -> Path | None:
    """The outermost folder above ``p`` that is now a symlink (or no folder), if any.
    Writable roots are resolved paths, so any such link was made by a command.
    ``seen`` remembers the folders looked at (the entries share most of them)."""
    for a in reversed(p.parents):
        bad = seen.get(a)
        if bad is None:
            try:
                bad = not stat.S_ISDIR(os.lstat(a).st_mode)  # a symlink, or no folder
            except OSError:
                bad = False  # absent: nothing to write through
            seen[a] = bad
        if bad:
            return a
    return None


def _quarantine(p: Path, roots: list[Path]) -> str:
    try:
        writer, rel = writer_at(p, roots)
        dest = writer.set_aside(rel, ".codemode-refused-")
    except (OSError, ToolError) as exc:
        return f"the command replaced {p}, which could not be moved aside: {exc}"
    return f"the command replaced {p}; moved the new one to {dest}"


def _identity(p: Path) -> tuple[int, int, int] | None:
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode)


def _copy(p: Path, budget: list[int], depth: int = 0) -> Copy:
    """What ``p`` holds (see ``Copy``); ``budget``: bytes still to copy, then entries
    still to copy (both set at the top when only the bytes are given)."""
    if len(budget) == 1:
        budget.append(_MAX_COPY_ENTRIES)
    budget[1] -= 1
    if budget[1] < 0 or depth > _MAX_COPY_DEPTH:
        return "?"
    try:
        st = os.lstat(p)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(p)
    if stat.S_ISREG(st.st_mode):
        if st.st_size > budget[0]:
            return "?"
        budget[0] -= st.st_size
        return _read_regular(p, st.st_size)
    if stat.S_ISDIR(st.st_mode):
        out: dict[str, Copy] = {}
        try:
            names = os.listdir(p)
        except OSError:
            return "?"
        for name in sorted(names):
            c = _copy(p / name, budget, depth + 1)
            if c == "?":
                return "?"
            out[name] = c
        return out
    return "?"  # a device, FIFO or socket: nothing to keep


def _read_regular(p: Path, size: int) -> Copy:
    """The bytes of the regular file ``p``; "?" for anything else by the time it is
    opened (a command running beside may swap it for a FIFO: never waited on), or when
    it holds more than the ``size`` it was budgeted for (it may have grown since, or
    been made a sparse file of terabytes)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(p, flags)
    except OSError:
        return "?"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "?"
        chunks = []
        total = 0
        while total <= size and (chunk := os.read(fd, min(1 << 20, size + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
        return "?" if total > size else b"".join(chunks)
    except OSError:
        return "?"
    finally:
        os.close(fd)


def _restore(writer: Writer, rel: str, p: Path, before: Copy) -> None:
    """Put ``rel`` (``p``) back as ``before``: a file is written to a new name and
    renamed over whatever is there (a link, a FIFO, a hard link is replaced, never
    opened), a link made again, a folder made and its entries restored one by one."""
    if before is None:
        writer.remove_tree(rel)
        return
    if isinstance(before, str):
        writer.remove_tree(rel)
        writer.symlink(rel, before)
        return
    now = writer.lstat(rel)
    if isinstance(before, bytes):
        if now is not None and stat.S_ISDIR(now.st_mode):
            writer.remove_tree(rel)
        writer.write(rel, before, make_parents=True)
        return
    if now is not None and not stat.S_ISDIR(now.st_mode):
        writer.remove(rel)
    if now is None or not stat.S_ISDIR(now.st_mode):
        writer.mkdir(rel, make_parents=True)
    for name in set(writer.names(rel)) - set(before):
        writer.remove_tree(f"{rel}/{name}")
    for name, child in before.items():
        if _copy(p / name, [_MAX_COPY_BYTES]) != child:
            _restore(writer, f"{rel}/{name}", p / name, child)
