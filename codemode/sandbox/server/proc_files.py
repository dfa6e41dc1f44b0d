"""Reading ``/proc`` in the command server (standard library only: it runs in the
sandbox as part of ``command_server``'s program, ``server_program``)."""

from __future__ import annotations

import os


def read_all(path: str) -> bytes:
    """The whole of a (``/proc``) file, without a Python file object: read after every
    command, so its cost counts."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def children(pid: int) -> list[int]:
    """The children of ``pid`` (``/proc``; scanned where the kernel lacks the list)."""
    try:
        return [int(x) for x in read_all(f"/proc/{pid}/task/{pid}/children").split()]
    except OSError:
        pass
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(name))
    return out
