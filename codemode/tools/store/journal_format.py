"""The write journal's file format (``journal`` writes and replays it).

A journal is ``codemode-journal 1 <SHA-256 of the rest>``, a newline, one JSON line
(the workspace, the roots, the writer's pid and start time, and per path ``path``,
``tmp``, ``before`` as [offset, length] into the bytes that follow, ``mode``, ``link``,
``after`` as a SHA-256, ``made`` folders, ``unknown``, and ``parents``: for a removal
that may also remove the folders it empties, those folders, absent from older
journals), ``base`` and ``id``: the deepest folder on the path's way that existed when the
journal was written, links resolved, and its device and inode (absent from older
journals: the path's root then), ``way``: for a writer that follows no link, the link
met on the path's way and its target (absent: none), then the original bytes.
``decode`` accepts nothing else: a checksum that fails, a path that is not absolute and
normalised or lies outside the roots, a blob out of range, a temporary name with a
slash are a ``BadJournal``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"codemode-journal 1 "


@dataclass
class Entry:
    """One path a commit touches. ``before``: the bytes it held (None: no file;
    ``before_link``: it was a symlink to that target); ``unknown`` True for a single
    write, whose rename is atomic and needs no undo. ``after``: SHA-256 of the new
    bytes, None for a removal."""

    path: Path
    tmp: str | None = None
    before: bytes | None = None
    before_mode: int = 0o644
    before_link: str | None = None
    after: str | None = None
    unknown: bool = False
    made_dirs: list[Path] = field(default_factory=list)
    # A removal that may also remove the folders above the file (/undo of a turn that
    # created it): made again, shallowest first, when the file is put back.
    parent_dirs: list[Path] = field(default_factory=list)
    # An empty folder the commit removes (a batch's ``rmdir``): made again, with
    # ``before_mode``, when missing.
    removed_dir: bool = False
    # Where the commit's walk stood when the journal was written (``journal_walk``): the
    # deepest folder of ``path`` that existed, every link resolved, and its (st_dev,
    # st_ino). ``path`` and ``made_dirs`` lie below it; a recovery walks from it, no
    # link followed, and acts only if it is still that folder. None: an older journal.
    base: Path | None = None
    base_id: tuple[int, int] | None = None
    # For a writer that follows no link (``anchored(follow=False)``): the link on the
    # path's way when the journal was written, and its target. Nothing of the commit
    # lies below it while it is still there: a recovery that meets it passes, silent.
    way_link: tuple[Path, str] | None = None


def encode(workspace: Path, roots: Sequence[Path], entries: Sequence[Entry]) -> list[bytes]:
    """The journal's bytes, in parts (the originals are not copied into one buffer)."""
    blobs: list[bytes] = []
    offset = 0
    rows: list[dict[str, Any]] = []
    for e in entries:
        blob: list[int] | None = None
        if e.before is not None:
            blob = [offset, len(e.before)]
            blobs.append(e.before)
            offset += len(e.before)
        rows.append(
            {
                "path": os.fsdecode(e.path),
                "tmp": e.tmp,
                "before": blob,
                "mode": e.before_mode,
                "link": e.before_link,
                "after": e.after,
                "unknown": e.unknown,
                "made": [os.fsdecode(d) for d in e.made_dirs],
                "parents": [os.fsdecode(d) for d in e.parent_dirs],
                "dir": e.removed_dir,
                "base": None if e.base is None else os.fsdecode(e.base),
                "id": None if e.base_id is None else list(e.base_id),
                "way": None if e.way_link is None else [os.fsdecode(e.way_link[0]), e.way_link[1]],
            }
        )
    header = {
        "workspace": os.path.realpath(workspace),
        "roots": [os.fsdecode(r) for r in roots],
        "pid": os.getpid(),
        "time": time.time(),
        "entries": rows,
    }
    line = json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"
    digest = hashlib.sha256(line)
    for data in blobs:
        digest.update(data)
    return [MAGIC + digest.hexdigest().encode() + b"\n", line, *blobs]


class BadJournal(ValueError):
    """A journal that fails validation: it is set aside, never acted on."""


@dataclass
class Loaded:
    roots: list[Path]
    entries: list[Entry]
    pid: int
    started: float


def _abs_path(raw: object, roots: Sequence[Path] | None = None) -> Path:
    if not isinstance(raw, str) or not raw.startswith("/") or os.path.normpath(raw) != raw:
        raise BadJournal(f"not an absolute normalised path: {raw!r}")
    path = Path(raw)
    if roots is not None and not any(path.is_relative_to(r) and path != r for r in roots):
        raise BadJournal(f"{raw!r} is outside the journal's roots")
    return path


def _base(
    row: dict[str, Any], roots: Sequence[Path], path: Path
) -> tuple[Path | None, tuple[int, int] | None]:
    raw = row.get("base")
    if raw is None:
        return None, None
    base = Path(raw) if raw in [os.fsdecode(r) for r in roots] else _abs_path(raw, roots)
    if not path.is_relative_to(base) or path == base:
        raise BadJournal(f"{row['path']!r} is not below its base")
    ident = row.get("id")
    if ident is None:
        return base, None
    if not isinstance(ident, list) or len(ident) != 2 or not all(type(n) is int for n in ident):
        raise BadJournal("bad folder identity")
    return base, (ident[0], ident[1])


def _way(raw: object, roots: Sequence[Path]) -> tuple[Path, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[1], str):
        raise BadJournal("bad link on the way")
    return _abs_path(raw[0], roots), raw[1]


def decode(data: bytes, workspace: Path) -> Loaded:
    first, sep, body = data.partition(b"\n")
    if not sep or not first.startswith(MAGIC):
        raise BadJournal("not a codemode journal")
    if hashlib.sha256(body).hexdigest().encode() != first[len(MAGIC) :]:
        raise BadJournal("checksum mismatch")
    line, _, blobs = body.partition(b"\n")
    header = json.loads(line)
    if header.get("workspace") != os.path.realpath(workspace):
        raise BadJournal("journal of another workspace")
    roots = [_abs_path(r) for r in header["roots"]]
    entries: list[Entry] = []
    for row in header["entries"]:
        before = None
        if row["before"] is not None:
            start, length = (int(n) for n in row["before"])
            if start < 0 or length < 0 or start + length > len(blobs):
                raise BadJournal("blob out of range")
            before = blobs[start : start + length]
        tmp = row["tmp"]
        if tmp is not None and (not isinstance(tmp, str) or "/" in tmp or not tmp.endswith(".tmp")):
            raise BadJournal(f"bad temporary name {tmp!r}")
        link = row["link"]
        if link is not None and not isinstance(link, str):
            raise BadJournal("bad link")
        after = row["after"]
        if after is not None and (not isinstance(after, str) or len(after) != 64):
            raise BadJournal("bad digest")
        path = _abs_path(row["path"], roots)
        base, base_id = _base(row, roots, path)
        entries.append(
            Entry(
                path=path,
                tmp=tmp,
                before=before,
                before_mode=int(row["mode"]) & 0o7777,
                before_link=link,
                after=after,
                unknown=bool(row["unknown"]),
                made_dirs=[_abs_path(d, roots) for d in row["made"]],
                parent_dirs=[_abs_path(d, roots) for d in row.get("parents", [])],
                removed_dir=row.get("dir") is True,
                base=base,
                base_id=base_id,
                way_link=_way(row.get("way"), roots),
            )
        )
    return Loaded(roots, entries, int(header["pid"]), float(header["time"]))
