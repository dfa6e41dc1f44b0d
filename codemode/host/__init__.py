"""The embedding API: a tool host that runs JavaScript against Python tools.

host = ToolHost("path/to/repo")

@host.tool
def word_count(text: str) -> int:
    "Count the words in a text."
    return len(text.split())

result = await host.execute("return await tools.word_count({text: 'a b c'})")

docs/embedding.md is the embedder's page: defaults, limits, cells, delegated calls and
the model-facing tool.

The package loads what a name needs when it is first asked for: ``ToolHost`` brings
the tools, the sandbox and the hooks (``tool_host.py``); ``shared_session`` and
``delegated_session`` only the runtime (``sessions.py``), for hosts whose programs'
tools are not codemode's (the Codex code-mode host, whose start Codex waits for).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.host.delegate import DelegatedProgram, PendingCall
    from codemode.host.model_tool import ModelTool
    from codemode.host.sessions import delegated_session, shared_session
    from codemode.host.tool_host import HOST_APPROVAL_REMEDY, ToolHost

__all__ = [
    "HOST_APPROVAL_REMEDY",
    "DelegatedProgram",
    "ModelTool",
    "PendingCall",
    "ToolHost",
    "delegated_session",
    "shared_session",
]

# Where each name lives (loaded on first use).
_HOMES = {
    "ToolHost": "tool_host",
    "HOST_APPROVAL_REMEDY": "tool_host",
    "DelegatedProgram": "delegate",
    "PendingCall": "delegate",
    "ModelTool": "model_tool",
    "shared_session": "sessions",
    "delegated_session": "sessions",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'codemode.host' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"codemode.host.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
