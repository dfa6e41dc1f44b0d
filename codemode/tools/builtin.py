"""The tools every session starts with."""

from __future__ import annotations

from codemode.tools.base import Tool
from codemode.tools.files import LIST_DIR, READ_FILE, WRITE_FILE
from codemode.tools.registry import ToolRegistry
from codemode.tools.search import GLOB, GREP
from codemode.tools.shell import SHELL


def builtin_tools() -> list[Tool]:
    """The built-in tools, in the order they are presented to the model."""
    return [SHELL, READ_FILE, WRITE_FILE, LIST_DIR, GLOB, GREP]


def builtin_registry() -> ToolRegistry:
    """A fresh registry holding the built-in tools, ready for embedders to extend."""
    return ToolRegistry(builtin_tools())
