"""The configured MCP servers a script names, for commands without a session.

A script reaches a server's tools as ``tools.SERVER.tool(...)`` (or
``tools["SERVER"]``). ``interpreter run`` starts only the servers its script names:
starting every configured server for every script would make a one-line script wait
on all of them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codemode.tools.registry import ToolRegistry


def servers_named_in(source: str, tables: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The entries of ``tables`` (``[mcp_servers.*]``) whose server ``source`` names."""
    named = {}
    for name, table in tables.items():
        word = re.escape(name)
        pattern = rf"\btools\s*(?:\?\.|\.)\s*{word}\b|\btools\s*\[\s*([\"'`]){word}\1\s*\]"
        if re.search(pattern, source):
            named[name] = table
    return named


def add_servers(
    registry: ToolRegistry, tables: dict[str, dict[str, Any]], log_dir: Path, notices: list[str]
) -> ToolRegistry:
    """Start the servers in ``tables`` and add their tools to ``registry`` (stopped by
    ``registry.close()``); a server that fails adds a line to ``notices`` and no tools."""
    if tables:
        from codemode.mcp.adapter import add_configured_servers

        _manager, statuses = add_configured_servers(registry, tables, log_dir)
        notices.extend(f"mcp server {s.name}: {s.error}" for s in statuses if s.error)
    return registry
