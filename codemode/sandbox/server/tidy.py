"""What the command server removes when no command is running: what commands may have
left outside the writable roots that a sandbox of their own would have taken with it
(standard library only: it runs in the sandbox as part of ``command_server``'s program,
``server_program``)."""

from __future__ import annotations

import ctypes
import os
import stat

from codemode.sandbox.server.proc_files import read_all

_IPC_RMID = 0
_SHM = "/dev/shm"


def remove_all(path: str) -> None:
    """Remove ``path`` and everything below it, whatever modes a command set on the
    folders (each is made 0700 before it is listed: the server owns what its commands
    made). Only called with no command running, so nothing changes meanwhile."""
    stack = [(path, False)]
    while stack:
        current, listed = stack.pop()
        st = os.lstat(current)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(current)
        elif listed:
            os.rmdir(current)
        else:
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                os.chmod(current, 0o700)
            stack.append((current, True))
            stack.extend((entry.path, False) for entry in os.scandir(current))


def tidy(libc: ctypes.CDLL) -> list[str]:
    """With no command running: drop the files in ``/dev/shm`` and the namespace's
    System V shared memory, semaphores and message queues. Returns what is still there
    (the server is then replaced)."""
    problems = []
    try:
        st = os.lstat(_SHM)
        if stat.S_IMODE(st.st_mode) != 0o1777:
            os.chmod(_SHM, 0o1777)
        found = False
        for entry in os.scandir(_SHM):
            found = True
            try:
                remove_all(entry.path)
            except (OSError, RecursionError):
                pass
        if found and os.listdir(_SHM):
            problems.append("/dev/shm could not be emptied")
    except OSError as exc:
        problems.append(f"/dev/shm: {exc.strerror}")
    for kind in ("shm", "sem", "msg"):
        try:
            rows = read_all(f"/proc/sysvipc/{kind}").decode(errors="replace").splitlines()[1:]
        except OSError:
            continue
        if not rows:
            continue  # (mostly: nothing to remove, nothing to look at again)
        for row in rows:  # "key id perms ...": the id is the second column
            ident = int(row.split()[1])
            if kind == "shm":
                libc.shmctl(ident, _IPC_RMID, None)
            elif kind == "sem":
                libc.semctl(ident, 0, _IPC_RMID)
            else:
                libc.msgctl(ident, _IPC_RMID, None)
        try:
            if len(read_all(f"/proc/sysvipc/{kind}").splitlines()) > 1:
                problems.append(f"System V {kind} left")
        except OSError:
            pass
    return problems
