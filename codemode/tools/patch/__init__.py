"""The patch engine behind ``apply_patch``: the Codex ``*** Begin Patch`` format (and
unified diffs), applied all-or-nothing.

    outcome = apply_patch_text(text, cwd)      # raises PatchError, changing nothing
    outcome.changes, outcome.diff, outcome.summary()

Modules, in the order a patch flows through them: ``lenient`` (unwrap fences and shell
heredocs), ``lexer`` (classify lines, forgiving common slips), ``parser`` (lark LALR over
the grammar in ``apply_patch.lark``; ``unified`` for unified diffs), ``plan`` (every
operation checked and computed in memory over the files as the session's store has them,
with ``edit`` and ``matching``), ``diff`` (the unified diff of what changed); the store
then commits it all or nothing (``codemode.tools.store``: on disk, temp files and
renames rolled back on failure, ``codemode.tools.store.commit``). ``intercept``
recognises ``apply_patch <<'EOF'`` sent to the shell tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode.tools.patch.errors import PatchError
from codemode.tools.patch.model import AddFile, Change, Chunk, DeleteFile, Patch, UpdateFile

if TYPE_CHECKING:
    from codemode.tools.patch.engine import PatchOutcome, apply_patch_text


def __getattr__(name: str) -> Any:
    # The engine (and lark with it) loads on first use, so that importing a light part
    # of the package, such as ``intercept`` from the shell tool, stays cheap.
    if name in ("PatchOutcome", "apply_patch_text"):
        from codemode.tools.patch import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AddFile",
    "Change",
    "Chunk",
    "DeleteFile",
    "Patch",
    "PatchError",
    "PatchOutcome",
    "UpdateFile",
    "apply_patch_text",
]
