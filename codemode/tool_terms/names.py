"""How a tool's name is spelled on each surface: a leaf module, shared by the registry
and the sandbox's trust check (which names the tool and its MCP server in its refusals).

Namespaced tools (an MCP server's) are registered as ``mcp__NS__NAME``: that is their
name in the classic dialect, and code mode calls them as ``tools.NS.NAME(args)``.
"""

from __future__ import annotations

NAMESPACE_PREFIX = "mcp__"


def split_namespace(name: str) -> tuple[str, str] | None:
    """``mcp__NS__NAME`` -> ("NS", "NAME"); None for a plain tool name."""
    if not name.startswith(NAMESPACE_PREFIX):
        return None
    ns, sep, member = name[len(NAMESPACE_PREFIX) :].partition("__")
    return (ns, member) if sep and ns and member else None


def code_name(name: str) -> str:
    """How a program spells the tool: ``shell`` or ``NS.NAME``."""
    parts = split_namespace(name)
    return f"{parts[0]}.{parts[1]}" if parts else name
