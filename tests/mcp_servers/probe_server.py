"""A small MCP server for the tests: structured and plain results, a slow tool, a crash.

Run as ``python probe_server.py`` (stdio) or ``python probe_server.py --http PORT``.
Every process writes its pid to stderr at start, so tests can tell a restart happened.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)
from pydantic import BaseModel

server = MCPServer("probe")


class Sum(BaseModel):
    total: int


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return Sum(total=a + b)


@server.tool(structured_output=False)
def shout(text: str) -> str:
    """Upper-case a text (a plain result, no output schema)."""
    return text.upper()


@server.tool(name="wait-ms")
async def wait_ms(ms: int, label: str = "") -> Sum:
    """Sleep ms milliseconds, then give them back (a tool name with a dash)."""
    await asyncio.sleep(ms / 1000)
    return Sum(total=ms)


# A 1x1 PNG, base64.
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@server.tool()
def picture(label: str) -> CallToolResult:
    """Several content blocks of its own (text, image, resource) and structured content."""
    return CallToolResult(
        content=[
            TextContent(type="text", text=f"a picture of {label}"),
            ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri=f"probe://{label}", text="caption"),
            ),
        ],
        structured_content={"label": label, "pixels": 1},
    )


@server.tool()
def where() -> dict[str, str | None]:
    """The server's working directory and $PROBE_MARKER."""
    return {"cwd": os.getcwd(), "marker": os.environ.get("PROBE_MARKER")}


@server.tool()
def pid() -> Sum:
    """This server process's id."""
    return Sum(total=os.getpid())


@server.tool()
async def die(after_ms: int = 0) -> str:
    """Exit the server process in the middle of the call."""
    await asyncio.sleep(after_ms / 1000)
    print("probe: dying on request", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def die_soon(after_ms: int) -> str:
    """Answer, then exit the server process after_ms later (between calls)."""

    def exit_now() -> None:
        print("probe: exiting between calls", file=sys.stderr, flush=True)
        os._exit(4)

    asyncio.get_running_loop().call_later(after_ms / 1000, exit_now)
    return "bye"


@server.tool(structured_output=False)
def lookup(key: str) -> str:
    """Look a key up in a small table, e.g. "alpha" or "beta", i.e. one of two known keys.
    Unknown keys give an empty text."""
    return {"alpha": "first", "beta": "second"}.get(key, "")


@server.tool()
def refuse(reason: str) -> str:
    """Fail with an MCP tool error."""
    raise ToolError(reason)


# Two tools that each wait until both are in flight: they can only finish if the
# client really runs them at the same time (a timing-free test of concurrency).
_meeting: dict[str, int] = {"arrived": 0}
_everyone_here = asyncio.Event()


async def _meet(who: str) -> str:
    _meeting["arrived"] += 1
    if _meeting["arrived"] >= 2:
        _everyone_here.set()
    try:
        await asyncio.wait_for(_everyone_here.wait(), 20)
    except TimeoutError:
        raise ToolError(f"{who}: the other call never came (calls were not concurrent)") from None
    return who


@server.tool()
async def meet_a() -> str:
    """Wait until meet_b is called too."""
    return await _meet("a")


@server.tool()
async def meet_b() -> str:
    """Wait until meet_a is called too."""
    return await _meet("b")


if __name__ == "__main__":
    print(f"probe: started pid {os.getpid()}", file=sys.stderr, flush=True)
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
