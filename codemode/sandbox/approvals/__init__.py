"""Asking the user: the ``Approver`` protocol, and when a tool outside this process may run.

- ``approval``: ``Approver``, ``ApprovalRequest`` and the choices a user has
- ``tool_trust``: ``authorize_tool``, MCP tools by their server's configured trust
"""
