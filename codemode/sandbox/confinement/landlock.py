"""Landlock (Linux 5.13+): the fallback filesystem confinement when bubblewrap is missing.

The ruleset is built in the parent (one ``O_PATH`` descriptor per writable root) and
applied in the child just before exec. Only write-type accesses are handled, so reads
stay unrestricted; with ABI 4+ TCP bind/connect are denied as well unless the network is
allowed; with ABI 6+ the command can neither signal processes outside its sandbox nor
reach abstract Unix sockets outside it. Landlock can only grant, never carve out: a
read-only subfolder of a writable root (``.codemode/``, ``.git/config``) cannot be
expressed, so ``git_guard`` puts such entries back after each command; this is why
bubblewrap is preferred.

The rest of the confinement is in ``child_setup`` (``process_tree`` does the forking).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.sandbox.server import process_tree

if TYPE_CHECKING:
    from codemode.sandbox.confinement import seccomp

_SYSCALLS = {  # same numbers on every architecture that has Landlock
    "create_ruleset": 444,
    "add_rule": 445,
    "restrict_self": 446,
}
LANDLOCK_CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

WRITE_FILE, READ_FILE = 1 << 1, 1 << 2
REMOVE_DIR, REMOVE_FILE = 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK = 1 << 6, 1 << 7, 1 << 8, 1 << 9
MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1

# Device files commands expect to write to.
_WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")


SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def abi_version() -> int:
    """The Landlock ABI version the kernel offers (0 when Landlock is unavailable)."""
    if platform.system() != "Linux":
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    v = libc.syscall(
        _SYSCALLS["create_ruleset"],
        None,
        ctypes.c_size_t(0),
        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(v), 0)


def available() -> str | None:
    """None when Landlock works here, else why not."""
    v = abi_version()
    return None if v >= 1 else "Landlock is not available (needs Linux 5.13+ with it enabled)"


def _write_access(abi: int) -> int:
    access = (
        WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM
    )
    if abi >= 2:
        access |= REFER
    if abi >= 3:
        access |= TRUNCATE
    return access


class Ruleset:
    """A Landlock ruleset file descriptor, to be applied in a child with ``apply``."""

    def __init__(self, writable: Iterable[Path], *, deny_network: bool) -> None:
        abi = abi_version()
        if abi < 1:
            raise OSError("Landlock is not available")
        libc = _libc()
        handled = _write_access(abi)
        attr = _RulesetAttr(
            handled,
            NET_BIND_TCP | NET_CONNECT_TCP if (deny_network and abi >= 4) else 0,
            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
        )
        size = 24 if abi >= 6 else 16 if abi >= 4 else 8
        fd = libc.syscall(
            _SYSCALLS["create_ruleset"],
            ctypes.byref(attr),
            ctypes.c_size_t(size),
            ctypes.c_uint32(0),
        )
        if fd < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
        self.fd = int(fd)
        self.network_confined = bool(attr.handled_access_net)
        self.scoped = bool(attr.scoped)
        try:
            for root in writable:
                self._allow(root, handled)
            file_access = WRITE_FILE | (TRUNCATE if abi >= 3 else 0)
            for dev in _WRITABLE_DEVICES:
                if os.path.exists(dev):
                    self._allow(Path(dev), file_access)
        except BaseException:
            os.close(self.fd)
            raise

    def _allow(self, path: Path, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # a root that does not exist cannot be written anyway
        try:
            if not os.path.isdir(path):
                access &= WRITE_FILE | TRUNCATE | READ_FILE
            rule = _PathBeneathAttr(access, pfd)
            r = _libc().syscall(
                _SYSCALLS["add_rule"],
                ctypes.c_int(self.fd),
                ctypes.c_int(RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            )
            if r != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(pfd)

    def apply(self) -> None:
        """Restrict the calling process (a child before exec). Needs no_new_privs."""
        libc = _libc()
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_SYSCALLS["restrict_self"], ctypes.c_int(self.fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")

    def close(self) -> None:
        os.close(self.fd)


def child_setup(ruleset: Ruleset, filt: seccomp.PreparedFilter | None) -> Callable[[], None]:
    """The ``preexec_fn`` of a command confined with Landlock.

    In the child: new PID (and mount) namespaces where the kernel allows, a watcher
    process that ends the command's whole process tree when the command exits, then in
    the command's own process a fresh ``/proc``, every capability dropped, the Landlock
    ruleset and the seccomp filter (``process_tree.enter``).
    """
    plan = process_tree.Plan.for_this_process()

    def setup() -> None:
        process_tree.enter(plan)
        ruleset.apply()
        process_tree.drop_capabilities(plan)
        if filt is not None:
            filt.install()

    return setup
