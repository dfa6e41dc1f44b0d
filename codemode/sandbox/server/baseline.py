"""What the command server passes on to every command it starts, checked and put back
before each one (standard library only: it runs in the sandbox as part of
``command_server``'s program, ``server_program``)."""

from __future__ import annotations

import ctypes
import os

# ioprio_get/ioprio_set by architecture (the standard library has no wrapper).
_IOPRIO_CALLS = {"x86_64": (252, 251), "aarch64": (31, 30)}
_IOPRIO_WHO_PROCESS = 1


class Baseline:
    """What the server passes to every command it starts that a command could have
    changed since: the OOM adjustment (through ``/proc/1/oom_score_adj``), the CPU
    affinity, the nice value, the scheduling policy and the I/O priority, as they were
    when the server started. The filter (``seccomp``) refuses to change the scheduling
    of another process, so the last three should never move; the first two are put
    back before each command. ``restore`` says what could not be."""

    def __init__(self, libc: ctypes.CDLL, oom_fd: int | None) -> None:
        self.libc = libc
        self.oom_fd = oom_fd
        self.oom = os.pread(oom_fd, 32, 0) if oom_fd is not None else b""
        self.affinity = os.sched_getaffinity(0)
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        self.policy = os.sched_getscheduler(0)
        self._ioprio_calls = _IOPRIO_CALLS.get(os.uname().machine)
        self.ioprio = self._ioprio()

    def _ioprio(self) -> int | None:
        if self._ioprio_calls is None:
            return None
        return int(self.libc.syscall(self._ioprio_calls[0], _IOPRIO_WHO_PROCESS, 0))

    def restore(self) -> list[str]:
        problems = []
        if self.oom_fd is not None:
            try:
                if os.pread(self.oom_fd, 32, 0) != self.oom:
                    os.pwrite(self.oom_fd, self.oom, 0)
            except OSError as exc:
                problems.append(f"oom_score_adj: {exc.strerror}")
        try:
            if os.sched_getaffinity(0) != self.affinity:
                os.sched_setaffinity(0, self.affinity)
        except OSError as exc:
            problems.append(f"affinity: {exc.strerror}")
        if os.getpriority(os.PRIO_PROCESS, 0) != self.nice:
            try:
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)
            except OSError as exc:
                problems.append(f"nice: {exc.strerror}")
        if os.sched_getscheduler(0) != self.policy:
            try:
                os.sched_setscheduler(0, self.policy, os.sched_param(0))
            except OSError as exc:
                problems.append(f"scheduling policy: {exc.strerror}")
        if self.ioprio is not None and self._ioprio() != self.ioprio:
            problems.append("I/O priority")
        return problems
