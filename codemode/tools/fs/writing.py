"""Writing one file for the tools: the writable roots as a ``Tree``, and the write."""

from __future__ import annotations

from pathlib import Path

from codemode.tools.context import ToolContext, ToolError
from codemode.tools.fs.beneath import Tree, write_atomic


def writable_tree(ctx: ToolContext, *, follow: bool = True) -> Tree:
    """The roots the file tools of ``ctx`` may write under (danger-full-access: all)."""
    if ctx.sandbox is not None:
        roots = ctx.sandbox.writable_roots()
        if roots is not None and not roots:
            mode = ctx.sandbox.settings.sandbox_mode
            raise ToolError(f"refusing to write: the sandbox mode is {mode}")
    else:
        roots = [ctx.workspace, *ctx.writable_roots]
    return Tree(roots, follow=follow)


def write_new_or_replace(tree: Tree, path: Path, data: bytes, shown: str) -> bool:
    """Write ``data`` at ``path``, making missing directories; True if it created the file."""
    with tree.locate(path, make_parents=True, shown=shown) as spot:
        return write_atomic(spot, data)
