"""Shipping a repository to a worker that does not share the driver's filesystem.

The driver packs the working copy — its files, symlinks as links, modes and
timestamps, and its VCS metadata (``.git`` included, so that git works in the worker;
its hooks left out) — into a gzip-compressed tar archive held in memory; the worker unpacks it
into a private temporary directory that then plays the repository's part: the script
runs in a copy of it and the journal is computed against it (``worker.py``). Only the
journal and the report line come back.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def pack(root: Path) -> bytes:
    """The working copy at ``root`` as a .tar.gz, in memory."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        archive.add(root, arcname=".", filter=_files_only)
    return buffer.getvalue()


def _files_only(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    # Files, directories and symlinks; no FIFOs or devices, and no .git/hooks (the
    # worker's copy leaves them out: workcopy.py).
    if member.name == "./.git/hooks" or member.name.startswith("./.git/hooks/"):
        return None
    if member.isfile() or member.isdir() or member.issym():
        return member
    return None


def unpack(data: bytes, dest: Path) -> None:
    """Unpack an archive from ``pack`` into ``dest`` (created). Members that would land
    outside ``dest`` are refused (tarfile's "tar" filter); symlinks keep their targets,
    as in the repository."""
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(dest, filter="tar")
