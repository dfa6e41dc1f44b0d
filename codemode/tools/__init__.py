"""Tools: each defined once (name, argument and result models, async handler) and exposed
to every surface through a ``ToolRegistry``.

``builtin_registry()`` gives the standard set: shell, read_file, write_file, list_dir,
glob and grep.
"""

from typing import TYPE_CHECKING, Any

from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.tools.base import Tool, define_tool


def __getattr__(name: str) -> Any:
    # Tool and define_tool need pydantic; load it only when they are asked for.
    if name in ("Tool", "define_tool"):
        from codemode.tools import base

        return getattr(base, name)
    raise AttributeError(f"module 'codemode.tools' has no attribute {name!r}")


__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "builtin_registry",
    "define_tool",
]
