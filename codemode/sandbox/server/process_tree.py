"""The process side of the Landlock fallback: namespaces, a watcher, no capabilities.

Runs in the child between fork and exec (``landlock.child_setup``):

1. ``unshare`` new PID and mount namespaces (with a user namespace when not root); this
   fails where user namespaces are disabled, and the command then shares the host's.
2. ``fork``: the parent stays behind as the *watcher* (a child subreaper holding no file
   descriptors); the child goes on to exec the command, as PID 1 of the new namespace.
   When the command exits the watcher ends whatever it left behind: the kernel ends a
   PID namespace with its first process, and without one the watcher kills every orphan
   reparented to it (``setsid`` and double-forked ones included) before it exits with
   the command's status.
3. The command gets a fresh ``/proc`` (only its own processes: no other process's
   ``environ``), dies with the watcher, and loses every capability: bounding and
   ambient sets emptied, securebits locked so that uid 0 gains none on exec.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from dataclasses import dataclass

from codemode.sandbox.server.proc_files import children

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 24, 28
PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 47, 4
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE, each with its lock bit
SECUREBITS_LOCKED = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


@dataclass(frozen=True)
class Plan:
    """What the child needs, computed in the parent (nothing to look up after fork)."""

    uid: int
    gid: int
    last_cap: int

    @classmethod
    def for_this_process(cls) -> Plan:
        try:
            with open("/proc/sys/kernel/cap_last_cap") as f:
                last = int(f.read().strip())
        except (OSError, ValueError):
            last = 63
        return cls(os.geteuid(), os.getegid(), last)

    @property
    def flags(self) -> int:
        return CLONE_NEWPID | CLONE_NEWNS | (0 if self.uid == 0 else CLONE_NEWUSER)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter(plan: Plan) -> bool:
    """Steps 1–3 up to the capability drop; True when the command got its own PID
    namespace. Returns only in the process that goes on to exec the command."""
    libc = _libc()
    own_ns: bool = libc.unshare(plan.flags) == 0
    if own_ns and plan.uid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{plan.uid} {plan.uid} 1")
        _write("/proc/self/gid_map", f"{plan.gid} {plan.gid} 1")
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    watcher = os.getpid()
    child = os.fork()
    if child != 0:
        _watch(child, sweep=not own_ns)  # never returns
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    if os.getppid() not in (watcher, 0):  # the watcher died before PDEATHSIG was armed
        # (0: PID 1 of a new namespace, whose parent lies outside it)
        os._exit(137)
    if own_ns:
        libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
        libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    return own_ns


def drop_capabilities(plan: Plan) -> None:
    """Empty the bounding and ambient sets and every capability of this process."""
    libc = _libc()
    libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED, 0, 0, 0)
    for cap in range(plan.last_cap + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed: cannot drop capabilities")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _watch(child: int, *, sweep: bool) -> None:
    """The watcher: wait for the command, end what it left, exit with its status."""
    try:
        os.closerange(0, 65536)  # hold nothing: not the output pipe, not exec's error pipe
        status = None
        while status is None:
            try:
                pid, st = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            except InterruptedError:
                continue
            if pid == child:
                status = st
        if sweep:  # in a PID namespace the kernel has ended them with the command
            _end_orphans()
        if status is None:
            os._exit(255)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    finally:
        os._exit(255)


def _end_orphans() -> None:
    """Kill and reap every process reparented to this (subreaper) process."""
    me = os.getpid()
    while True:
        kids = children(me)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG if kids else 0)[0] > 0:
                pass
        except ChildProcessError:
            return
        except OSError as exc:
            if exc.errno != errno.EINTR:
                return
