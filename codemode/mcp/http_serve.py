"""`interpreter mcp-server --http PORT`: the MCP server on streamable HTTP, on loopback,
for the server's own user alone.

Anyone on the machine can connect to a loopback port, and a program run here runs
commands in the server's workspace as the server's user: each request's connection is
checked against the kernel's record of who made it (``process/peer_user.py``), and one of
another user gets 403 and nothing else. The MCP SDK's own bounds stay in force (sessions
at once, idle sessions ended, request body size).
"""

from __future__ import annotations

from typing import Any

from codemode.process.peer_user import is_own_user_at

HOST = "127.0.0.1"
_REFUSED = b"this MCP server serves its own user only\n"


class OwnUserOnly:
    """ASGI middleware: requests whose connection another local user made are refused."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not _own(scope):
            if scope["type"] == "http":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                    }
                )
                await send({"type": "http.response.body", "body": _REFUSED})
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        await self.app(scope, receive, send)


def _own(scope: Any) -> bool:
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return False
    return is_own_user_at((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))


def run_http(server: Any, port: int) -> None:
    """Serve the ``MCPServer`` ``server`` on http://127.0.0.1:PORT/mcp until stopped."""
    # lazy: the HTTP stack, for --http only
    import anyio
    import uvicorn

    app = OwnUserOnly(server.streamable_http_app(host=HOST))
    level = str(getattr(getattr(server, "settings", None), "log_level", "INFO")).lower()
    config = uvicorn.Config(app, host=HOST, port=port, log_level=level)
    anyio.run(uvicorn.Server(config).serve)
