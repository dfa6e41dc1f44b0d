"""inotify on the folders of the code a warm server runs: any change makes it stale,
and a stale server stops listening (an upgrade is never served by older code)."""

from __future__ import annotations

import ctypes
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


class Watch:
    def __init__(self, folders: list[Path]) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for folder in folders:
            libc.inotify_add_watch(self.fd, os.fsencode(folder), _MASK)

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
