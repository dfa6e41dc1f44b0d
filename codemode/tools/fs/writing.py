"""Writing one file for the tools: the writable roots as a ``Tree``, and the write."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from codemode.hostfs.beneath import Missing, Spot, Tree, write_atomic
from codemode.tool_terms.errors import ToolError
from codemode.tools.fs import guard
from codemode.tools.fs.reading import NotRegular, TooBig, read_spot

if TYPE_CHECKING:
    from codemode.sandbox.protocols import Sandbox


class WriteScope(Protocol):
    """What writing files needs to know of a session: where it may write and how its
    paths resolve. A ``ToolContext`` is one; the file layer asks no more of it, so it
    sits below the context that holds it."""

    @property
    def workspace(self) -> Path: ...

    @property
    def writable_roots(self) -> list[Path]: ...

    @property
    def sandbox(self) -> Sandbox: ...

    def resolve(self, path: str | Path) -> Path: ...

    def resolve_writable(self, path: str | Path) -> Path: ...


def writable_tree(ctx: WriteScope, *, follow: bool = True) -> Tree:
    """The roots the file tools of ``ctx`` may write under (danger-full-access: all)."""
    roots = ctx.sandbox.writable_roots()
    if roots is not None and not roots:
        raise ToolError(f"refusing to write: the sandbox mode is {ctx.sandbox.sandbox_mode}")
    return Tree(roots, follow=follow, refuse=guard.write_refusal)


def existing_bytes(spot: Spot, cap: int, shown: str) -> bytes | None:
    """The regular file at ``spot``, None if there is none; refuses a directory."""
    try:
        return read_spot(spot, cap, shown)
    except FileNotFoundError:
        return None
    except TooBig:
        return None  # too big to look at: its encoding is taken to be UTF-8
    except NotRegular as exc:
        if exc.is_dir:
            raise IsADirectoryError(21, "is a directory", shown) from None
        raise ToolError(f"refusing to replace {exc}") from None


def locate_existing(tree: Tree, path: Path, shown: str) -> Spot | None:
    """The spot of ``path`` if its directory exists, else None (nothing created)."""
    try:
        return tree.locate(path, shown=shown)
    except Missing:
        return None


def write_new_or_replace(
    tree: Tree, path: Path, data: bytes, shown: str, *, tag: str | None = None
) -> bool:
    """Write ``data`` at ``path``, making missing directories; True if it created the
    file. ``tag`` names the temporary file (``beneath.tmp_name``)."""
    with tree.locate(path, make_parents=True, shown=shown) as spot:
        return write_atomic(spot, data, tag=tag)
