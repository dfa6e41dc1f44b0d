"""Driving a server over its stdio from tests: its answers by request id, and what the
process spent (CPU and peak memory, read from ``/proc``)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from typing import Any

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
# Each process's output lines, read by a thread of its own: a line already in the
# reader's buffer is not seen by ``select`` on its descriptor.
_READERS: dict[int, queue.Queue[bytes | None]] = {}


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def peak_mb(pid: int) -> float:
    """The process's peak resident memory (what a decoding would have made)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def answer(proc: subprocess.Popen[bytes], want_id: int, timeout_s: float = 120) -> Any:
    """The JSON-RPC answer to ``want_id`` on ``proc``'s output (others pass by)."""
    lines = _READERS.get(proc.pid)
    if lines is None:
        lines = _READERS[proc.pid] = queue.Queue()
        stream = proc.stdout
        assert stream is not None

        def read() -> None:
            for line in iter(stream.readline, b""):
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        assert line is not None, "the process closed its output"
        message = json.loads(line)
        if message.get("id") == want_id:
            return message
    raise AssertionError(f"no answer to {want_id} within {timeout_s} s")
