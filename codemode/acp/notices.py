"""What the session says beside the conversation (a ``Notice``: a retry, a hook that
failed, a reply cut off; a rolled-back write) as the editor shows it.

ACP has no session update for an agent's own remarks, so a notice is an agent message
chunk set apart from the model's words: a quoted paragraph of its own, prefixed
``codemode:``, with ``_meta.codemode.notice`` naming its kind, so that an editor that reads
``_meta`` can show it elsewhere and one that does not still shows it to the person.
"""

from __future__ import annotations

from acp import update_agent_message_text
from acp.schema import AgentMessageChunk

# The event types that become notices: ``Notice.type`` and ``WorkspaceRecovered.type``.
NOTICE = "notice"
WORKSPACE_RECOVERED = "workspace.recovered"


def notice_update(message: str, kind: str = NOTICE) -> AgentMessageChunk:
    """``message`` as an agent message chunk of its own paragraph."""
    lines = message.strip().splitlines() or [""]
    quoted = "\n".join(f"> {line}" if line else ">" for line in lines)
    quoted = quoted.replace("> ", "> codemode: ", 1)
    update = update_agent_message_text(f"\n\n{quoted}\n\n")
    update.field_meta = {"codemode": {"notice": {"kind": kind, "message": message}}}
    return update
