"""The seccomp filter of the restricted modes.

Denied (EPERM): IP and every other non-Unix socket unless the network is allowed; Unix
sockets (``socket(AF_UNIX, ...)``; ``socketpair`` stays, it reaches nothing) unless some
are allowed; ``ptrace``, cross-process memory access, taking another process's file
descriptors (``pidfd_getfd``), setting another process's limits (``prlimit``) or its
scheduling (nice value, policy, affinity, I/O priority), new POSIX message queues;
io_uring (its operations would bypass the socket rule); and, behind the capability
drop, everything that changes the host: mounts, host and domain names, the clocks,
kernel modules, kexec, reboot, swap, raw port I/O, process accounting, BPF, the kernel
keyrings, set-user-ID and set-group-ID bits on files (``_add_no_set_id``), and new user
namespaces (``clone3`` fails with ENOSYS, so the C library falls
back to ``clone``).

The filter is compiled once with pyseccomp (libseccomp) into a classic BPF program and
a hand-written prefix is put in front of it: on x86-64 every x32-ABI system call (number
with bit 30 set) fails with ENOSYS, so the x32 entry points cannot bypass the rules (the
known escape from filters that only list x86-64 numbers). System calls of any other
architecture (the i386 ``int 0x80`` entry, with ``socketcall``) kill the process: that is
libseccomp's bad-architecture action. Socket families are compared on the low 32 bits,
the width the kernel reads, so garbage in the upper half cannot dodge a rule.

bubblewrap loads the program for the sandboxed command (``--seccomp FD``); without
bubblewrap a ``preexec_fn`` installs it in the child with two ``prctl`` calls and
nothing else, so nothing that could hold a lock runs between fork and exec.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import platform
import socket
import struct
import tempfile
from typing import Any

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

DENIED_ALWAYS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "sethostname",
    "setdomainname",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "iopl",
    "ioperm",
    "acct",
    "bpf",
    "add_key",
    "request_key",
    "keyctl",
)

CLONE_NEWUSER = 0x10000000
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_ERRNO = 0x00050000
# struct sock_filter: u16 code, u8 jt, u8 jf, u32 k
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_OFF_NR, _OFF_ARCH = 0, 4


class SeccompUnavailable(RuntimeError):
    """pyseccomp or libseccomp is missing."""


def _x32_prefix() -> bytes:
    """BPF that fails x32 system calls (on x86-64) and falls through otherwise."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return b""
    ins = [
        (_LD_W_ABS, 0, 0, _OFF_ARCH),
        (_JEQ_K, 0, 3, _AUDIT_ARCH_X86_64),  # not x86-64: on to libseccomp's program
        (_LD_W_ABS, 0, 0, _OFF_NR),
        (_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in ins)


@functools.cache
def bpf_program(deny_network: bool, deny_unix: bool = True) -> bytes:
    """The compiled filter (raw ``struct sock_filter`` array)."""
    from codemode.process.pyseccomp_import import import_pyseccomp

    try:
        # lazy: libseccomp, only where a filter is built (and without ldconfig)
        pyseccomp = import_pyseccomp()
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so is not installed
        raise SeccompUnavailable(f"pyseccomp/libseccomp is not available: {exc}") from None
    flt = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    deny = pyseccomp.ERRNO(errno.EPERM)
    for name in DENIED_ALWAYS:
        try:
            flt.add_rule(deny, name)
        except (RuntimeError, ValueError, OSError):
            pass  # not a system call on this architecture
    low32 = 0xFFFFFFFF
    # no new user namespace (one would hold capabilities, if only over itself); clone3
    # passes its flags in memory a filter cannot read, so it reports ENOSYS and the C
    # library falls back to clone, whose flags it can
    newuser = pyseccomp.Arg(0, pyseccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    flt.add_rule(deny, "unshare", newuser)
    flt.add_rule(deny, "clone", newuser)
    flt.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    # no new limits for another process (the command server, or a command running
    # beside this one, would be left unable to start anything); its own, and reading
    # another's, stay allowed
    flt.add_rule(deny, "prlimit64", pyseccomp.Arg(0, pyseccomp.NE, 0),
                 pyseccomp.Arg(2, pyseccomp.NE, 0))
    _add_own_process_only(flt, deny)
    _add_no_set_id(flt, deny)
    if deny_network and deny_unix:
        flt.add_rule(deny, "socket")
    elif deny_network:
        # NE on the whole register: garbage in the upper half is denied too
        flt.add_rule(deny, "socket", pyseccomp.Arg(0, pyseccomp.NE, socket.AF_UNIX))
    elif deny_unix:
        flt.add_rule(
            deny, "socket", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, low32, socket.AF_UNIX)
        )
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        return _x32_prefix() + f.read()


# The scheduling of a process other than the caller (pid or "who" not 0): nice value,
# policy, priority, CPU affinity, I/O priority. Commands of one session share the
# command server's PID namespace, and the server (PID 1) passes what it has to every
# command it starts, so one command could otherwise start all the later ones at nice
# 19, SCHED_IDLE or on one CPU; with Landlock, a command could slow the agent itself.
# ``nice``, ``taskset``, ``chrt`` and ``ionice`` in front of a command act on the caller
# (0) and keep working. The OOM adjustment, set through /proc, is reset by the server
# before each command instead (``command_server``).
_OTHER_PROCESS_ARG0 = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr")
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1
_O_CREAT = 0o100


def _add_own_process_only(flt: Any, deny: Any) -> None:
    import pyseccomp

    for name in _OTHER_PROCESS_ARG0:
        flt.add_rule(deny, name, pyseccomp.Arg(0, pyseccomp.NE, 0))
    # setpriority(which, who, prio): PRIO_PGRP and PRIO_USER reach other processes
    # even with who 0 (the caller's group, every process of its user)
    flt.add_rule(deny, "setpriority", pyseccomp.Arg(0, pyseccomp.NE, _PRIO_PROCESS))
    flt.add_rule(deny, "setpriority", pyseccomp.Arg(1, pyseccomp.NE, 0))
    flt.add_rule(deny, "ioprio_set", pyseccomp.Arg(0, pyseccomp.NE, _IOPRIO_WHO_PROCESS))
    flt.add_rule(deny, "ioprio_set", pyseccomp.Arg(1, pyseccomp.NE, 0))
    # No new POSIX message queue: one would outlive its command in the IPC namespace the
    # server's commands share, and without mounting mqueue (a capability) nothing can
    # list them to remove it.
    flt.add_rule(deny, "mq_open", pyseccomp.Arg(1, pyseccomp.MASKED_EQ, _O_CREAT, _O_CREAT))


# No set-user-ID or set-group-ID bit on a file a command makes or changes: the workspace
# outlives the sandbox, and a command running as root (its capabilities dropped, but the
# files still root's) could leave a copy of a shell there that runs as root for anyone
# who can reach it (chmod u+s needs no capability on one's own file). For each call that
# sets a mode, by the argument that holds it: chmod's, and a file created with one
# (O_CREAT or O_TMPFILE: only then is open's mode argument read, so only then is it
# compared), mknod's regular files included. openat2 passes its mode in memory a filter
# cannot read: it reports ENOSYS, and callers fall back to openat.
_SET_ID = (0o4000, 0o2000)
_MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1,
             "mknod": 1, "mknodat": 2}  # fmt: skip
_CREATING_OPEN = {"open": (1, 2), "openat": (2, 3)}  # (flags argument, mode argument)
_O_TMPFILE_BIT = 0o20000000  # __O_TMPFILE (O_TMPFILE adds O_DIRECTORY)


def _add_no_set_id(flt: Any, deny: Any) -> None:
    import pyseccomp

    for bit in _SET_ID:
        for name, arg in _MODE_ARG.items():
            with contextlib.suppress(RuntimeError, ValueError, OSError):  # not a call here
                flt.add_rule(deny, name, pyseccomp.Arg(arg, pyseccomp.MASKED_EQ, bit, bit))
        for name, (flags, mode) in _CREATING_OPEN.items():
            for creating in (_O_CREAT, _O_TMPFILE_BIT):
                with contextlib.suppress(RuntimeError, ValueError, OSError):
                    flt.add_rule(deny, name,
                                 pyseccomp.Arg(flags, pyseccomp.MASKED_EQ, creating, creating),
                                 pyseccomp.Arg(mode, pyseccomp.MASKED_EQ, bit, bit))  # fmt: skip
    with contextlib.suppress(RuntimeError, ValueError, OSError):
        flt.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "openat2")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class PreparedFilter:
    """A filter ready to install in a forked child without allocating anything."""

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._prog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._libc = ctypes.CDLL(None, use_errno=True)

    def install(self) -> None:
        """Install in the calling process (meant for a child before exec)."""
        libc = self._libc
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


@functools.cache
def prepared(deny_network: bool, deny_unix: bool = True) -> PreparedFilter:
    return PreparedFilter(bpf_program(deny_network, deny_unix))


def available() -> str | None:
    """None when seccomp filters can be built here, else why not."""
    try:
        bpf_program(True)
    except SeccompUnavailable as exc:
        return str(exc)
    except OSError as exc:
        return f"libseccomp failed: {exc}"
    return None
