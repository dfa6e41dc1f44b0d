"""The engine's front door: patch text in, files changed (all of them or none)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from codemode.tools.context import ToolContext, store_for
from codemode.tools.patch.errors import HEADLINE, PARTIAL_HEADLINE, PatchError, printable
from codemode.tools.patch.model import Change
from codemode.tools.patch.parser import parse_patch
from codemode.tools.patch.plan import make_plan
from codemode.tools.store import FileStore
from codemode.tools.store.commit import CommitFailed

# One patch at a time per process: two patches planned against the same files at once
# would each commit over the other's work.
_LOCK = threading.Lock()


@dataclass
class PatchOutcome:
    """What an applied patch changed."""

    changes: list[Change]
    diff: str  # unified diff of every change, in patch order

    def summary(self) -> str:
        """One line per file: ``A path``, ``M path``, ``D path``, ``R old -> new``."""
        return "".join(f"{change.summary()}\n" for change in self.changes)


def apply_patch_text(
    text: str,
    cwd: str | Path,
    ctx: ToolContext | None = None,
    store: FileStore | None = None,
) -> PatchOutcome:
    """Apply ``text`` (the apply_patch format, or a unified diff) to the files under
    ``cwd``, which relative paths in the patch are taken from.

    ``ctx`` decides where writing is allowed (its workspace and writable roots); without
    one, the workspace is ``cwd``. The originals are read, and the result written,
    through ``store`` (by default ``store_for(ctx)``: the disk, a dry run's overlay,
    the editor's buffers; pass it when calling from a worker thread of an editor
    session). Every operation is checked in memory first; if any fails, or a write
    fails partway (the writes made are then undone), PatchError is raised and no file
    has changed.
    """
    base = Path(cwd).absolute()
    if ctx is None:
        ctx = ToolContext(workspace=base)
    files = store or store_for(ctx)
    patch, workdir = parse_patch(text)
    if workdir is not None:
        base = ctx.resolve(base / Path(workdir).expanduser())
        found = files.stat(base)
        if found is None or found.kind != "dir":
            raise PatchError(f"'cd {workdir}': no such directory.")
    with _LOCK:
        plan = make_plan(patch, base, ctx, files)
        try:
            files.commit(plan.removals, plan.writes, plan.originals)
        except CommitFailed as failed:
            headline = PARTIAL_HEADLINE if failed.partial else HEADLINE
            raise PatchError(failed.problems, headline=headline) from None
    return PatchOutcome(plan.changes, printable(plan.diff))
