"""MCP both ways: configured servers' tools inside a session, and our tool host served over MCP.

``config`` validates ``[mcp_servers.NAME]`` tables, ``client`` runs the servers (started on
first need, restarted once after a crash or timeout), ``adapter`` turns their tools into
registry tools, ``server`` exposes ``execute`` (and, for many tools, ``search_tools`` /
``describe_tool``) over stdio or streamable HTTP.

Nothing here is imported until MCP is configured or asked for: the ``mcp`` SDK is heavy.
"""
