"""A hostile tree for the file tools' tests and benchmarks: very deep, a file in each
folder."""

from __future__ import annotations

import os
from pathlib import Path


def deep_tree(top: Path, depth: int) -> None:
    """``top/d/d/.../d`` ``depth`` folders deep, a file holding ``needle`` in each: made
    relative to an open descriptor, as a path that long exceeds what one system call
    takes."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            leaf = os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(leaf, b"needle\n")
            os.close(leaf)
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
