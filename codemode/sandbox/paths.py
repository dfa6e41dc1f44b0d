"""Which paths the file tools may write: the writable roots, never their protected parts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# Inside a writable root these stay read-only: the agent's own rules and settings, and
# git hooks (code git would run later, outside the sandbox).
PROTECTED_SUBPATHS = (".codemode", ".git/hooks")


def write_refusal(path: Path, roots: Sequence[Path] | None) -> str | None:
    """Why ``path`` may not be written, or None if it may.

    ``roots`` None means anywhere (danger-full-access); an empty list means nowhere
    (read-only). Symlinks are resolved first, so a link inside the workspace that
    points outside it does not open a door; ``..`` is resolved the same way.
    """
    if roots is not None and not roots:
        return "the sandbox is read-only"
    real = path.resolve()
    if roots is None:
        return None
    real_roots = [r.resolve() for r in roots]
    if not any(real == r or real.is_relative_to(r) for r in real_roots):
        return "outside the writable roots"
    for r in real_roots:
        for sub in PROTECTED_SUBPATHS:
            protected = r / sub
            if real == protected or real.is_relative_to(protected):
                return f"{sub}/ is read-only"
    return None
