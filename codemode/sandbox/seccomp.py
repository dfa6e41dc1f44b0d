"""A seccomp filter that denies IP (indeed all non-Unix) sockets, ptrace and io_uring.

The filter is compiled once with pyseccomp (libseccomp) into a classic BPF program.
bubblewrap loads it for the sandboxed command (``--seccomp FD``); without bubblewrap a
``preexec_fn`` installs it in the child with two ``prctl`` calls and nothing else, so
nothing that could hold a lock runs between fork and exec. Denied calls fail with EPERM.
io_uring is denied because its operations would bypass the socket rule.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import socket
import tempfile

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

_DENIED_ALWAYS = ("ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup")


class SeccompUnavailable(RuntimeError):
    """pyseccomp or libseccomp is missing."""


@functools.cache
def bpf_program(deny_network: bool) -> bytes:
    """The compiled filter (raw ``struct sock_filter`` array)."""
    try:
        import pyseccomp
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so is not installed
        raise SeccompUnavailable(f"pyseccomp/libseccomp is not available: {exc}") from None
    flt = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    deny = pyseccomp.ERRNO(errno.EPERM)
    for name in _DENIED_ALWAYS:
        flt.add_rule(deny, name)
    if deny_network:
        flt.add_rule(deny, "socket", pyseccomp.Arg(0, pyseccomp.NE, socket.AF_UNIX))
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        return f.read()


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
def prepared(deny_network: bool) -> PreparedFilter:
    return PreparedFilter(bpf_program(deny_network))


def available() -> str | None:
    """None when seccomp filters can be built here, else why not."""
    try:
        bpf_program(True)
    except SeccompUnavailable as exc:
        return str(exc)
    except OSError as exc:
        return f"libseccomp failed: {exc}"
    return None
