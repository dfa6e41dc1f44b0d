"""``interpreter apply-patch``: apply a patch file to a directory from the command line."""

from __future__ import annotations

import sys
from pathlib import Path


def run_apply_patch_command(source: str, cwd: Path) -> int:
    """Apply the patch in ``source`` (a path, or ``-`` for stdin) under ``cwd``.

    Prints one ``A/M/D/R`` line per file and returns 0; on failure prints the error to
    stderr and returns 1, with no file changed.
    """
    from codemode.terminal.control_chars import echo
    from codemode.tools.patch.engine import apply_patch_text
    from codemode.tools.patch.errors import PatchError
    from codemode.tools.store.recovery import recover_at_start

    # What a killed earlier patch left is rolled back first, and said (the store would
    # do it silently on its first write).
    recover_at_start(cwd)

    try:
        if source == "-":
            text = sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
        else:
            text = Path(source).read_bytes().decode("utf-8", "surrogateescape")
    except OSError as exc:
        echo(f"apply-patch: cannot read {source}: {exc.strerror or exc}", err=True)
        return 1
    try:
        outcome = apply_patch_text(text, cwd)
    except PatchError as exc:
        echo(exc, err=True)
        return 1
    echo(outcome.summary(), nl=False)
    return 0
