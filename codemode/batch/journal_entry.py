"""One entry of a batch journal (``changes.py``), and the bound on a journal's size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["file", "symlink", "deleted", "mkdir", "rmdir"]

# The most new bytes one journal may carry. It travels whole, in memory, from the worker
# to the driver (pickled: twice, for a moment), and the driver holds it until it is
# applied: a script that wrote more (a multi-gigabyte file, sparse so that it cost no
# disk) would otherwise have the host hold all of it.
JOURNAL_BYTES = 1 << 30


class TooLarge(ValueError):
    """What a script wrote is more than a journal may carry (``JOURNAL_BYTES``)."""


@dataclass(frozen=True)
class Change:
    """One path's change; ``path`` is relative to the repository, in POSIX form."""

    path: str
    kind: Kind
    data: bytes = b""  # a file's new contents; a symlink's target (os.fsencode)
    executable: bool = False
    base: str | None = None  # fingerprint of what the repository held; None: nothing
