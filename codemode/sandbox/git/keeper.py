"""Keeping a session's protected entries as they were, around each confined command.

What ``SandboxSession.spawn`` does besides starting the command: the placeholder folders
bubblewrap binds over a missing ``.codemode/`` or ``.git`` (made before the first
command, so every command of the session finds the same ones and they can share one
command server); the watch for ``.codemode/`` folders and repositories below the roots'
tops (``codemode_watch``); the git guard's snapshot before a command and its repair
after it (``git_guard``); and, once the command has exited, what it created that git or
codemode would read later is set aside (``git_sanity``). One line per repair goes back
into the command's output.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.hostfs.writer import Writer
from codemode.tool_terms.errors import ToolError

if TYPE_CHECKING:
    from codemode.sandbox.git.git_guard import GuardState
    from codemode.sandbox.protection.codemode_watch import CodemodeWatch
    from codemode.sandbox.server.pidfd_process import ChildProcess

# Modules are imported where first needed: a session is held before its first command.


class Keeper:
    """The protected-entry state of one session (``SandboxSession`` holds one)."""

    def __init__(self) -> None:
        self._placeholders: set[tuple[Path, str]] = set()  # (writable root, name)
        self._guards: dict[int, GuardState] = {}
        self._baseline: GuardState | None = None
        self._watch: CodemodeWatch | None = None
        # repositories commands made that passed the check, and how they looked then:
        # checked again after every later command (one that was running when the check
        # ran could have planted something since, ``Promise.all``)
        self._created: dict[Path, tuple[object, ...]] = {}
        # ``guess_layout`` runs in the session's warm-up thread, ``close`` on the loop's:
        # placeholders are made and removed under this lock, none by a guess once closed.
        self._lock = threading.Lock()
        self._closed = False

    def layout(
        self, backend: str, writable: list[Path], guarded: list[Path]
    ) -> tuple[list[Path], list[Path]]:
        """The ``.codemode/`` folders below the roots' tops and the ``.git`` entries below
        them, for a command confined by ``backend``; with bubblewrap, the placeholders
        made first. ``guarded``: the roots whose entries are kept (the scratch folder is
        writable but not guarded)."""
        if backend == "bubblewrap":
            self._make_placeholders(writable)
        if backend == "none" or not guarded:
            return [], []
        watch = self._codemode_watch(guarded)
        nested = sorted(g for g in watch.git if os.path.lexists(g))
        return self._read_only(writable, guarded, watch.existing, nested), nested

    def guess_layout(self, writable: list[Path], guarded: list[Path]) -> list[Path] | None:
        """``layout``'s read-only folders for bubblewrap, guessed without walking the
        roots: those of a workspace with no ``.codemode/`` or repository below its top,
        as most are. For a command server started ahead of the first command, from
        another thread; that command's own ``layout`` says whether it can be used.
        None once the keeper is closed."""
        if not self._make_placeholders(writable, unless_closed=True):
            return None
        return self._read_only(writable, guarded, (), []) if guarded else []

    def _make_placeholders(self, writable: list[Path], unless_closed: bool = False) -> bool:
        """Whether they were made (not: ``unless_closed`` and the keeper is closed)."""
        from codemode.sandbox.confinement.bwrap import placeholders

        # bubblewrap needs a mount point to keep a missing .codemode/ or .git from being
        # created, and would leave it behind as an empty folder: made here instead;
        # removed at close() when still empty. Made and removed from the root's
        # descriptor (``writer``), no link followed.
        with self._lock:
            if unless_closed and self._closed:
                return False
            for root in writable:
                missing = placeholders(root)
                if not missing:
                    continue
                writer = Writer(root)
                for p in missing:
                    with contextlib.suppress(OSError, ToolError):  # (bubblewrap makes it)
                        writer.mkdir(p.name, 0o755)
                    self._placeholders.add((root, p.name))
        return True

    @staticmethod
    def _read_only(
        writable: list[Path], guarded: list[Path], existing: Iterable[Path], nested: list[Path]
    ) -> list[Path]:
        from codemode.sandbox.git.git_named import named_paths

        # files of the work tree git's configuration reads or runs (``git_named``)
        named = [
            p for r in [*guarded, *(g.parent for g in nested)] for p in named_paths(r, writable)
        ]
        return sorted({*existing, *named})

    def before(
        self, backend: str, guarded: list[Path], deeper: list[Path], nested: list[Path]
    ) -> GuardState | None:
        """The snapshot to repair from after the command (None: nothing to guard)."""
        if backend == "none" or not guarded:
            return None
        from codemode.sandbox.git import git_guard

        # While other commands run, their changes are no baseline: keep the first one
        # (a later command's snapshot could hold what an earlier one planted).
        if self._baseline is None or not self._guards:
            self._baseline = git_guard.take(
                guarded,
                full=backend == "landlock",
                extra=deeper,
                nested=[g.parent for g in nested],
            )
        return self._baseline

    def started(self, proc: ChildProcess, guard: GuardState) -> None:
        # by process object: commands in one command server share its pid
        self._guards[id(proc)] = guard

    def repair(self, guard: GuardState) -> list[str]:
        from codemode.sandbox.git import git_guard

        return [f"[sandbox] {note}" for note in git_guard.repair(guard)]

    def after(self, proc: ChildProcess, scratch: Path | None) -> list[str]:
        """Once ``proc`` has exited: put back any protected git or ``.codemode/`` entry
        it changed and set aside what it created there; one line per repair."""
        guard = self._guards.pop(id(proc), None)
        if guard is None:
            return []
        notes = self.repair(guard)
        if self._watch is not None:
            from codemode.sandbox.git import git_sanity
            from codemode.sandbox.protection.codemode_watch import set_aside

            watch = self._watch
            writable = [*watch.roots, *([scratch] if scratch else [])]
            notes += [f"[sandbox] {n}" for n in set_aside(watch.drain(), watch.roots)]
            recheck = {e for e, look in self._created.items() if git_sanity.looks(e) != look}
            for entry in sorted(watch.new_git | recheck):
                why = git_sanity.unsafe_reason(entry, writable) if os.path.lexists(entry) else None
                if why is not None:
                    notes.append(f"[sandbox] {git_sanity.set_aside(entry, why, writable)}")
                    watch.git.discard(entry)
                    self._created.pop(entry, None)
                elif os.path.lexists(entry):
                    self._created[entry] = git_sanity.looks(entry)
            watch.new_git.clear()
        return notes

    def _codemode_watch(self, roots: list[Path]) -> CodemodeWatch:
        from codemode.sandbox.protection.codemode_watch import CodemodeWatch

        if self._watch is None or self._watch.roots != roots:
            if self._watch is not None:
                self._watch.close()
            self._watch = CodemodeWatch(roots)
        return self._watch

    def close(self) -> None:
        """Stop watching; remove the placeholders still empty."""
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        with self._lock:
            self._closed = True
            for root, name in self._placeholders:
                writer = Writer(root)
                with contextlib.suppress(OSError, ToolError):  # gone, or not empty: kept
                    writer.rmdir(name)
            self._placeholders.clear()
