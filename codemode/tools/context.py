"""What a tool handler receives besides its arguments, and how it reports failure.

Kept apart from ``base.py`` so that the runtime can hold a context without importing
pydantic (the tool models are loaded only when a tool is first called).
"""

from __future__ import annotations

import os.path
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.tools.dry_run import DryRun


class ToolError(Exception):
    """A failure a tool reports to its caller; the message is shown to the program as-is.

    Handlers raise this for expected failures (missing file, path outside the
    workspace). Any other exception is reported too, but as ``TypeName: message``.
    """


@dataclass
class ToolContext:
    """What a handler may know about the session that called it."""

    workspace: Path
    # Extra writable roots beyond the workspace (the sandbox issue configures these).
    writable_roots: list[Path] = field(default_factory=list)
    # Set for a dry run: writing tools record changes here instead of on disk, and
    # read_file sees them (codemode.tools.dry_run).
    dry_run: DryRun | None = None

    def resolve(self, path: str | Path) -> Path:
        """Resolve ``path`` against the workspace; the result is absolute and normalised."""
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = self.workspace / p
        return Path(os.path.normpath(p))

    def resolve_writable(self, path: str | Path) -> Path:
        """Resolve ``path`` for writing; refuses anything outside the writable roots."""
        p = self.resolve(path)
        real = p.resolve()
        for root in [self.workspace, *self.writable_roots]:
            if real == root.resolve() or real.is_relative_to(root.resolve()):
                return p
        raise ToolError(f"refusing to write outside the workspace: {path}")

    def display(self, path: Path) -> str:
        """A path as the program should see it: relative to the workspace when inside."""
        try:
            return path.relative_to(self.workspace).as_posix() or "."
        except ValueError:
            return str(path)
