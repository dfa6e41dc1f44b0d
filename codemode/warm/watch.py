"""inotify on the folders of the code a warm server runs: any change makes it stale,
and a stale server stops listening (an upgrade is never served by older code)."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sysconfig
from pathlib import Path

# IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE,
# IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF
_MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800


def code_folders(package: Path) -> list[Path]:
    """The package's folders and the installed packages' folder."""
    folders = [Path(root) for root, _, _ in os.walk(package) if Path(root).name != "__pycache__"]
    return [*folders, Path(sysconfig.get_paths()["purelib"])]


# The limit each error says is spent, named in the log as the setting that raises it.
_LIMITS = {
    errno.EMFILE: "fs.inotify.max_user_instances, or the open files'",
    errno.ENOSPC: "fs.inotify.max_user_watches",
}


class Watch:
    """Every one of ``folders`` watched, or SystemExit (a line for the server's log): a
    server blind to a folder would serve the old code of an upgrade that changed it."""

    def __init__(self, folders: list[Path]) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise SystemExit(_cannot("inotify_init1", ctypes.get_errno()))
        for folder in folders:
            if libc.inotify_add_watch(self.fd, os.fsencode(folder), _MASK) < 0:
                number = ctypes.get_errno()
                os.close(self.fd)
                raise SystemExit(_cannot(str(folder), number))

    def changed(self) -> bool:
        """Whether what was read names a change of code (not bytecode, not a dot file)."""
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return False
        offset = 0
        while offset + 16 <= len(data):
            _, _, _, length = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16 : offset + 16 + length].rstrip(b"\0")
            offset += 16 + length
            if name == b"__pycache__" or name.endswith(b".pyc") or name.startswith(b"."):
                continue
            return True
        return False


def _cannot(what: str, number: int) -> str:
    limit = _LIMITS.get(number)
    raised = f" (a limit spent: {limit})" if limit else ""
    return (f"warm: cannot watch the code it serves: {what}: {os.strerror(number)}{raised}; "
            "an upgrade would go unseen, so it does not serve (commands start cold)")  # fmt: skip
