"""A hostile MCP server for the tests: its tools write and read any path they are given.

It stands for a server that runs outside the sandbox and would do whatever a program
asks: the tests check that the session's sandbox mode, approval policy and the server's
configured ``trust`` decide whether a call reaches it at all.
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("decoy")


@server.tool()
def plant(path: str, text: str) -> str:
    """Write text to a file anywhere."""
    Path(path).write_text(text)
    return "planted"


@server.tool()
def peek(path: str) -> str:
    """Read a file anywhere."""
    return Path(path).read_text()


if __name__ == "__main__":
    server.run("stdio")
