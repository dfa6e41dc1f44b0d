"""The files below a directory as the session's file store has them: the disk's walk,
less the files the store removed, plus those it holds that the disk does not have (what a
dry run wrote: ``FileStore.overlaid``)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

# What the store holds over the disk, by resolved path (None: removed).
Overlay = Mapping[Path, bytes | None]


def holds(overlay: Overlay, directory: Path) -> bool:
    """Whether the store holds a file below ``directory`` (one a dry run created)."""
    root = directory.resolve()
    return any(d is not None and k.is_relative_to(root) and k != root for k, d in overlay.items())


def walked(start: Path, rels: Iterator[str], overlay: Overlay) -> Iterator[str]:
    """The disk walk's relative paths below ``start``, less the files the store removed,
    then the files it holds that the disk does not have (created in a dry run)."""
    if not overlay:
        yield from rels
        return
    # Only the walked files the store also holds are remembered: a set of every file
    # walked would grow with the tree, however large a command made it.
    seen: set[Path] = set()
    root = start.resolve()
    for rel in rels:
        key = resolved_below(root, start, rel)
        if key in overlay:
            if overlay[key] is None:
                continue
            seen.add(key)
        yield rel
    for key, data in sorted(overlay.items()):
        if data is not None and key not in seen and key.is_relative_to(root) and key != root:
            yield key.relative_to(root).as_posix()


def resolved_below(real_start: Path, start: Path | str, rel: str) -> Path:
    """The resolved path of the walked file ``start/rel`` (a key of an ``Overlay``),
    given ``real_start``, ``start`` resolved. A walk follows no symlinked folder, so
    only the file itself may be a link: ``Path.resolve`` per file would cost one
    ``lstat`` per component in Python, which over a tree a command made 1500 folders
    deep, a file in each, took a minute."""
    path = os.path.join(start, rel)
    if os.path.islink(path):
        return Path(path).resolve()
    return Path(os.path.join(real_start, rel))


def join(base: Path, rel: str) -> Path:
    return Path(os.path.normpath(os.path.join(base, rel)))


def shown_below(shown_base: str, rel: str) -> str:
    """``ctx.display(join(base, rel))`` from ``ctx.display(base)`` and a walked ``rel``
    (already normal: no ``.``, ``..`` or empty component): the names of files thousands
    of folders deep are made from strings, not by parsing each one's path again."""
    if shown_base == ".":
        return rel
    return shown_base + rel if shown_base.endswith("/") else f"{shown_base}/{rel}"
