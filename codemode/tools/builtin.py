"""The tools every session starts with."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from codemode.tools.base import Tool

# In the order they are presented to the model. Each module is imported on first use.
BUILTIN_TOOLS = {
    "shell": "codemode.tools.shell:SHELL",
    "apply_patch": "codemode.tools.apply_patch:APPLY_PATCH",
    "read_file": "codemode.tools.read_file:READ_FILE",
    "write_file": "codemode.tools.write_file:WRITE_FILE",
    "list_dir": "codemode.tools.list_dir:LIST_DIR",
    "glob": "codemode.tools.glob:GLOB",
    "grep": "codemode.tools.grep:GREP",
}


def builtin_registry() -> ToolRegistry:
    """A fresh registry holding the built-in tools, ready for embedders to extend."""
    registry = ToolRegistry()
    for name, spec in BUILTIN_TOOLS.items():
        registry.add_lazy(name, spec)
    return registry


def builtin_tools() -> list[Tool]:
    """The built-in tools, loaded."""
    return list(builtin_registry())
