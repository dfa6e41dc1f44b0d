"""Which paths the file tools may write: the writable roots, never their protected parts."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.protection.own_paths import file_refusal
from codemode.sandbox.protection.protected import protected_reason


def write_refusal(path: Path, roots: Sequence[Path] | None) -> str | None:
    """Why ``path`` may not be written, or None if it may.

    ``roots`` None means anywhere (danger-full-access); an empty list means nowhere
    (read-only). Symlinks are resolved first, so a link inside the workspace that
    points outside it does not open a door; ``..`` is resolved the same way. Inside a
    root, ``codemode.sandbox.protection.protected`` decides what stays read-only.
    """
    if roots is not None and not roots:
        return "the sandbox is read-only"
    real = path.resolve()
    if roots is None:
        return None
    real_roots = [r.resolve() for r in roots]
    inside = [r for r in real_roots if real == r or real.is_relative_to(r)]
    if not inside:
        return "outside the writable roots"
    lexical = Path(os.path.normpath(path.absolute()))
    for r in inside:
        reason = protected_reason(real.relative_to(r))
        if reason is None and lexical.is_relative_to(r):
            # a symlink named .codemode or .git inside the root is protected as well
            reason = protected_reason(lexical.relative_to(r))
        if reason is not None:
            return reason
    return file_refusal(real, lexical, real_roots)
