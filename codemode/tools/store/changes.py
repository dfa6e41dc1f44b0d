"""The changes a commit writes (``Write``, ``Removal``) and what it restores on failure
(``Original``): plain records that ``FileStore.commit`` names and ``commit`` carries out.

Apart from ``commit`` so that the store's seam (the package) can name them without
importing the module that imports the seam back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Write:
    path: Path  # the file written (a symlink's target, for files reached through one)
    data: bytes
    mode: int
    shown: str  # the path as the patch named it, for messages


@dataclass
class Removal:
    path: Path
    shown: str


@dataclass
class Original:
    """A file's content and mode before the patch, to restore on rollback."""

    data: bytes
    mode: int
