"""Everything a hook started, found and stopped whole — ``setsid`` and double forks too.

A process group is not enough: ``setsid`` leaves it, and a child whose parent exits is
handed to init. So a hook starts through the ``subreaper`` helper
(``sandbox/helpers/subreaper.c``: it marks itself a child subreaper and execs the hook in
its place), which keeps every orphan of the hook's tree below the hook's own first
process while that runs. Stopping it then walks ``/proc/PID/task/*/children`` down from
that process and kills what it finds, again until nothing is left (a fork in the
meantime is found on the next pass: its orphans come back to the subreaper), then the
process itself. Where no helper could be built, the walk still finds every descendant
whose parent is alive.

After the hook has exited, what it left is no longer below it; what still holds its
output open is found by the pipes themselves (``holders``: any process with one of
them among its descriptors) and stopped with its own tree.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable

# Passes of the kill walk before giving up on a tree that keeps forking faster.
_PASSES = 100


def helper() -> list[str]:
    """What to put in front of a hook's argv: the subreaper helper, when one is
    available (else nothing: the walk still finds descendants whose parent lives)."""
    from codemode.sandbox.helpers import compiled

    found = compiled.path("subreaper.c")
    return [found] if found else []


def stop_tree(pid: int) -> None:
    """SIGKILL every descendant of ``pid``, then ``pid`` and its process group."""
    for _ in range(_PASSES):
        found = [p for p in descendants(pid) if not _zombie(p)]
        if not found:
            break
        _kill(found)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def stop_holders(fds: Iterable[int]) -> None:
    """Stop every process (and its tree) that holds one of the pipes ``fds`` are ends
    of: what a hook left behind still writing its output."""
    links = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            links.add(f"pipe:[{os.fstat(fd).st_ino}]")
    if not links:
        return
    me = os.getpid()
    for pid in holders(links):
        if pid != me:
            stop_tree(pid)


def holders(links: set[str]) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in links:
                    out.append(int(name))
                    break
            except OSError:
                continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found, then theirs)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in out:
                out.append(child)
                todo.append(child)
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
        except OSError:
            continue
    return kids


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True  # gone


def _kill(pids: Iterable[int]) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
