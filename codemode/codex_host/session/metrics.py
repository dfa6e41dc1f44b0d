"""The host's process figures for ``GetProcessMetrics``, read from /proc.

- ``cpu_seconds_total``: the host process's own user and system time, plus that of its
  child processes (its engine workers) that are still alive (or killed and not yet
  reaped), plus that of every child it has reaped (the kernel adds a reaped child's
  time, and that of the children it reaped, to its parent's ``cutime``/``cstime``). So the
  figure never drops when a session's workers end.
- ``resident_memory_bytes``: the resident set of the host and of its living children;
  a reaped worker holds no memory.
- ``process_start_time_seconds``: when the host process started, in seconds since the
  epoch (the boot time plus the process's start in clock ticks since boot).

A figure /proc cannot give (a child that ended between listing and reading) counts as
nothing; the host's own are always there.
"""

from __future__ import annotations

import os
from typing import NamedTuple

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


class ProcessFigures(NamedTuple):
    process_id: int
    process_start_time_seconds: float
    cpu_seconds_total: float
    resident_memory_bytes: int


class _Stat(NamedTuple):
    own_ticks: int  # utime + stime
    reaped_ticks: int  # cutime + cstime
    start_ticks: int
    rss_bytes: int


def _stat(pid: int | str) -> _Stat:
    with open(f"/proc/{pid}/stat", "rb") as f:
        # The command name may hold spaces and parentheses: what follows the last ")"
        # starts at field 3 (state), so field N is rest[N - 3].
        rest = f.read().rsplit(b")", 1)[1].split()
    return _Stat(
        int(rest[11]) + int(rest[12]),
        int(rest[13]) + int(rest[14]),
        int(rest[19]),
        int(rest[21]) * _PAGE,
    )


def _children() -> list[str]:
    pids: list[str] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as f:
                pids += f.read().decode().split()
        except OSError:  # a thread that ended meanwhile
            continue
    return pids


def _boot_time() -> int:
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime "):
                return int(line.split()[1])
    raise OSError("/proc/stat gives no boot time")


def process_figures() -> ProcessFigures:
    """The host's figures now (``OSError`` only if /proc cannot be read at all)."""
    host = _stat("self")
    ticks = host.own_ticks + host.reaped_ticks
    rss = host.rss_bytes
    for pid in _children():
        try:
            child = _stat(pid)
        except (OSError, IndexError, ValueError):  # ended between the listing and the read
            continue
        ticks += child.own_ticks
        rss += child.rss_bytes
    return ProcessFigures(
        process_id=os.getpid(),
        process_start_time_seconds=_boot_time() + host.start_ticks / _TICKS,
        cpu_seconds_total=ticks / _TICKS,
        resident_memory_bytes=rss,
    )
