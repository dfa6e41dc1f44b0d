"""Which paths the file tools must never write or read: the one place that decides.

Every write the file tools make (write_file, edit, apply_patch, /undo) passes the path
it is about to create or replace, symlinks already resolved by the race-free walk in
``beneath``, through ``write_refusal``; every read passes ``read_refusal``. Rules:

- nothing inside a ``.git`` directory, nor a ``.git`` file (a worktree's pointer), at
  any depth: hooks, config, info and the rest are code git runs later on the host;
  git commands in the shell still update a repository as usual;
- nothing inside a ``.codemode`` directory at any depth (the agent's own rules);
- both by any name a case-insensitive filesystem (a Windows drive under WSL, vfat, an
  ext4 folder with casefolding) takes for the same folder: ``.GIT``, ``.Codemode``,
  ``.git.`` and ``.git `` (NTFS drops trailing dots and spaces), ``GIT~1`` (the NTFS
  short name), as git itself refuses them in a tree;
- no name holding a control character, a line separator or a bidirectional
  formatting character (``codemode.tools.path_chars``), even one reached through a
  symlink whose target was given such a name;
- reads of the agent process's own ``/proc`` entries (its environment holds the
  credentials that subprocesses are denied), of the kernel files that look regular
  but block until data arrives, and of kernel memory (``/proc/kcore``, ``kallsyms``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.protection.protected import protected_reason
from codemode.tools.path_chars import path_problem

# Path components under which the file tools never write, at any depth.
_PROTECTED_DIRS = {
    ".git": ".git/ is read-only to the file tools",
    ".codemode": ".codemode/ is read-only",
}
# /proc/self, /proc/thread-self and /proc/PID (after symlinks are resolved: /proc/PID/...).
_PROC_PROCESS = re.compile(r"^/proc/(?:\d+|self|thread-self)(?:/|$)")
# Files that look regular but wait for data that may never come (the kernel log, the
# tracing pipes): a read could outlive every time limit.
_BLOCKING = re.compile(r"^/(?:proc/kmsg$|sys/kernel/(?:debug/)?tracing/(?:.*/)?trace_pipe)")
# Kernel memory and addresses, which look like regular files to a process with the
# capabilities to read them (an agent run as root): no coding task needs them.
_KERNEL_MEMORY = re.compile(r"^/proc/(?:kcore|vmcore|kallsyms|kpage[a-z]+)$")


def write_refusal(parts: Sequence[str]) -> str | None:
    """Why a path with these components below its writable root may not be written
    (or created as a directory on the way), or None if it may.

    First the sandbox's own predicate (``codemode.sandbox.protection.protected``, which the shell's
    confinement also follows), then the file tools' stricter rule: they write nothing
    inside a ``.git`` directory at all."""
    reason = protected_reason(parts)
    if reason is not None:
        return reason
    for part in parts:
        reason = _PROTECTED_DIRS.get(_folded(part))
        if reason is not None:
            return reason
        problem = path_problem(part)
        if problem is not None:
            return f"the name {part!r} is refused: {problem}"
    return None


# NTFS short names of the protected folders (git's "is_ntfs_dotgit" rule).
_SHORT_NAMES = {"git~1": ".git", "codemo~1": ".codemode"}


def _folded(part: str) -> str:
    """The protected folder a case-insensitive filesystem may take ``part`` for (its
    own name otherwise)."""
    folded = part.rstrip(". ").casefold() if part not in ("", ".", "..") else part
    if folded in _PROTECTED_DIRS:
        return folded
    return _SHORT_NAMES.get(folded, part)


def read_refusal(real: Path | str) -> str | None:
    """Why the file at ``real`` (symlinks resolved) may not be read, or None."""
    shown = real if isinstance(real, str) else real.as_posix()
    if _PROC_PROCESS.match(shown):
        return "process information under /proc is not readable by the file tools"
    if _BLOCKING.match(shown):
        return "it waits for data that may never come; read it with tools.shell"
    if _KERNEL_MEMORY.match(shown):
        return "kernel memory and addresses are not readable by the file tools"
    return None
