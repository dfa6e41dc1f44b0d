"""What a spare makes ready while it waits, and for which kind of command.

A spare is a process the server forks ahead of its next caller (``server.QUIET_S`` after
the last command ended). Forked, it has every module imported; what a command still
pays for after that is the launcher's to say, by the *kind* of the command. Each run
tells the server its command's kind (one byte, through the gate: ``worker``), and the
next spare makes ready for the kind of the last command run, so a user who starts
code-mode hosts all day (Codex: one per session) gets spares with a host's engine worker
booted, and one who runs other commands gets spares without one (codemode's launcher
has every spare copy its pages ahead as well: ``codemode/launch/serve.py``).

A launcher gives the server two functions (``codemode.launch.serve`` gives codemode's):
``kind(argv)`` (a byte) and ``prepare(kind)``, run in the spare before it waits. A
preparation its command does not use is the command's to discard (the spare cannot
know its command before it has one).
"""

from __future__ import annotations

from collections.abc import Callable

# The kind of a command nothing is prepared for.
PLAIN = b"c"
# What the server tells a spare once the caller it was handed passed the checks it makes
# meanwhile (``server.Server._to_spare``).
GO = b"y"

Kind = Callable[[list[str]], bytes]
Prepare = Callable[[bytes], None]


def no_kind(argv: list[str]) -> bytes:
    return PLAIN


def prepare_nothing(kind: bytes) -> None:
    return None


def one_byte(kind: bytes) -> bytes:
    """``kind`` as the gate carries it: one byte that is not NUL (an empty read is a
    refusal), ``PLAIN`` for anything else."""
    return kind if len(kind) == 1 and kind != b"\0" else PLAIN


def own_pages() -> None:
    """Copy now every private page shared with the server that writing would copy: a
    fork shares the server's memory until either side writes, and Python writes to every
    object it touches (reference counts), so a fresh spare pays a fault and a copy for
    each page on its first use (several ms of a caller's wait). Done while it waits
    instead (MADV_POPULATE_WRITE, Linux 5.14; elsewhere the pages are copied as they are
    touched, as before). It costs the spare the memory of those pages."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    populate_write = 23
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1] != "rw-p" or (len(fields) > 5 and fields[5].startswith("[v")):
                continue  # [vvar], [vsyscall]: not memory of ours
            start, end = (int(x, 16) for x in fields[0].split("-"))
            libc.madvise(start, end - start, populate_write)
