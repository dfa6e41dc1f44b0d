"""An MCP server whose schemas use ``$defs/Item``; ``books`` and ``stock`` (argv[1])
define Item differently, as two unrelated servers would.

Run as ``python items_server.py books`` or ``python items_server.py stock``.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

variant = sys.argv[1] if len(sys.argv) > 1 else "books"
server = MCPServer(f"items-{variant}")

if variant == "books":

    class Item(BaseModel):
        title: str
        author: str | None = None

else:

    class Item(BaseModel):  # type: ignore[no-redef]
        sku: str
        count: int


class Shelf(BaseModel):
    items: list[Item]
    total: int


@server.tool()
def store(item: Item) -> Shelf:
    """Put an item on the shelf and give the shelf back."""
    return Shelf(items=[item], total=1)


@server.tool()
def count(prefix: str = "") -> Shelf:
    return Shelf(items=[], total=0)


if __name__ == "__main__":
    server.run()
