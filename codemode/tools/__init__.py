"""Tools: each defined once (name, argument and result models, async handler) and exposed
to every surface through a ``ToolRegistry``.

``builtin_registry()`` gives the standard set: shell, read_file, write_file, list_dir,
glob and grep.
"""

from codemode.tools.base import Tool, ToolContext, ToolError, define_tool
from codemode.tools.builtin import builtin_registry
from codemode.tools.registry import ToolRegistry

__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "builtin_registry",
    "define_tool",
]
