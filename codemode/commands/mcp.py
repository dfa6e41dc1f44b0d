"""What ``interpreter mcp list`` and ``interpreter mcp-server`` do (the CLI only parses).

An entry point: it builds a session's sandbox (the composition root), so it lives above
the ``mcp`` package, which the composition root itself uses for MCP clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from codemode.config import Config, codemode_home
from codemode.terminal.control_chars import echo, json_text

# The isolate of `execute` programs when the config names none.
SERVER_ENGINE = "quickjs"

if TYPE_CHECKING:
    from pathlib import Path

    from codemode.assembly.options import SessionOptions
    from codemode.mcp.server import HostService
    from codemode.sandbox.session import SandboxSession
    from codemode.tools.registry import ToolRegistry

# The heap cap of each `execute` program (docs/embedding.md's table of entry points).
MEMORY_MB = 512


def list_servers(config: Config, *, as_json: bool) -> int:
    """Start the configured servers, print each one's state and tools; 1 if any failed."""
    from codemode.mcp.client import McpManager  # lazy: the mcp SDK, for mcp list only
    from codemode.mcp.config import parse_mcp_servers

    manager = McpManager(parse_mcp_servers(config.mcp_servers), codemode_home() / "logs")
    try:
        statuses = manager.start_all()
    finally:
        manager.close()
    if as_json:
        listed = []
        for status in statuses:
            entry = status.to_json()
            wants = manager.servers[status.name].config.wants_tool
            for tool in entry["tools"]:
                tool["enabled"] = wants(tool["name"])
            listed.append(entry)
        echo(json_text({"servers": listed}, indent=2))
    elif not statuses:
        echo("no MCP servers configured (add [mcp_servers.NAME] to the config file)")
    for status in [] if as_json else statuses:
        config_entry = manager.servers[status.name].config
        where = config_entry.url or " ".join([config_entry.command or "", *config_entry.args])
        echo(f"{status.name}  {status.state}  {status.transport}: {where}")
        if status.error:
            echo(f"  error: {status.error}")
        for tool in status.tools:
            wanted = "" if config_entry.wants_tool(tool.name) else "  (disabled)"
            summary = " ".join((tool.description or "").split())[:90]
            echo(f"  {tool.name}{wanted}  {summary}")
    return 1 if any(s.state == "failed" for s in statuses) else 0


def _hook(registry: ToolRegistry, cwd: Path, sandbox: SandboxSession) -> None:
    """The hooks a session in ``cwd`` would run, on every call the server's programs
    make (a project's untrusted ones are left out, with a warning: no one is there to
    trust them)."""
    from codemode.hooks.loading import program_hooks
    from codemode.hooks.tool_calls import install

    loaded = program_hooks(
        cwd,
        sandbox=sandbox.settings,
        untrusted_hint=": trust them with `interpreter hooks trust`",
    )
    for notice in loaded.notices:
        echo(f"warning: {notice}", err=True)
    if loaded.engine is not None:
        install(registry, loaded.engine, sandbox)


def serve(
    config: Config,
    options: SessionOptions,
    *,
    http_port: int | None,
) -> int:
    """Serve the tool host over stdio, or streamable HTTP on 127.0.0.1:PORT, in the
    workspace ``options.cwd``, sandboxed as the config and ``options`` say. Over stdio
    the handshake is answered before the host is set up (``SetUpOnFirstUse``)."""
    if config.mcp_servers:
        from codemode.mcp.config import parse_mcp_servers

        parse_mcp_servers(config.mcp_servers)  # a bad table is a usage error now, not later
    wire = None
    if http_port is None:
        from codemode.mcp.stdio_wire import StdioWire

        # Before anything is built: nothing a part prints while it starts reaches the
        # client's wire (fd 1 goes to stderr from here).
        wire = StdioWire.start()
    from codemode.mcp.server import SetUpOnFirstUse, new_server, run_stdio

    server = new_server()
    setup = SetUpOnFirstUse(server, lambda: _host_service(config, options))
    server.middleware.append(setup)
    try:
        if http_port is None:
            assert wire is not None
            # At the end of the input, requests still running get this long to finish.
            wire.drain_s = config.exec_timeout_s + 30
            run_stdio(server, wire)
        else:
            from codemode.mcp.http_serve import run_http

            try:
                setup.service()  # a server that cannot serve says so before it listens
            except RuntimeError:
                return 1  # (said on stderr by the set-up)
            echo(f"serving MCP on http://127.0.0.1:{http_port}/mcp (to this user only)",
                 err=True)  # fmt: skip
            run_http(server, http_port)
    finally:
        setup.close()
    return 0


def _host_service(config: Config, options: SessionOptions) -> HostService:
    """The tool host ``mcp-server`` serves: the built-in tools and the configured MCP
    servers' (started now), the sandbox, the hooks a session in the workspace runs."""
    from codemode.assembly.parts import sandbox_for
    from codemode.assembly.program import ProgramParts
    from codemode.host import ToolHost
    from codemode.js_runtime.models import Limits
    from codemode.mcp.adapter import add_configured_servers
    from codemode.mcp.approval import policy_decider
    from codemode.mcp.server import RESULT_FIELD_CHARS, HostService
    from codemode.tools.builtin import builtin_registry
    from codemode.tools.context import ToolContext
    from codemode.tools.store.recovery import recover_at_start

    cwd = options.cwd
    # Before any client's program reads the workspace (said on stderr, the server's log).
    recover_at_start(cwd.resolve())
    registry = builtin_registry()
    sandbox = sandbox_for(config, options, cwd.resolve())
    if config.mcp_servers:
        _manager, statuses = add_configured_servers(
            registry, config.mcp_servers, codemode_home() / "logs"
        )
        for status in statuses:
            if status.error:
                echo(f"mcp server {status.name}: {status.error}", err=True)
    settings = sandbox.settings
    _hook(registry, cwd, sandbox)
    engine = config.engine or SERVER_ENGINE

    def programs(guarded: ToolRegistry, context: ToolContext, limits: Limits) -> ToolHost:
        return ToolHost.from_parts(ProgramParts(guarded, context, None), engine=engine,
                                   limits=limits)  # fmt: skip

    return HostService(
        registry,
        cwd,
        decide=policy_decider(settings.approval_policy, settings.sandbox_mode),
        programs=programs,
        limits=Limits(
            timeout_s=config.exec_timeout_s,
            memory_mb=MEMORY_MB,
            output_chars=RESULT_FIELD_CHARS,
        ),
        sandbox=sandbox,
    )
