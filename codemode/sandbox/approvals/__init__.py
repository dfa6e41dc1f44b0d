"""Asking the user: the ``Approver`` protocol, and when a tool outside this process may run.

- ``approval``: ``Approver``, ``ApprovalRequest`` and the choices a user has
- ``tool_trust``: ``authorize_tool``, MCP tools by their server's configured trust
- ``gate``: ``CommandGate``, a session's rules and approver: what a command, an outside
  tool's call or a write outside the roots needs before it goes ahead
"""
