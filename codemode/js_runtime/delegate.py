"""How a code session's programs reach the world outside the runtime: the delegate.

The runtime never runs a tool. Each ``tools.NAME(args)`` a program makes becomes a
``NestedCall`` handed to the session's ``Delegate``; what it returns is the call's
result, and a ``ToolError`` (``codemode.tool_terms.errors``) it raises is a failed call whose
message the program sees (as a catchable ``ToolError``). Console output, host events
and call progress leave through ``Delegate.notify``. The names a program may call come from a
``ToolNames``: plain names (``tools.NAME``) and namespaces (``tools.NS.NAME``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

# A nested call failed in a way the program should see: ``str(exc)`` is the message of
# the ``ToolError`` its Promise rejects with. Any other exception a delegate raises
# reaches the program too, prefixed with its type. (Defined in the package's leaf, so
# that every layer can raise it.)
from codemode.tool_terms.errors import ToolError as ToolError

if TYPE_CHECKING:
    from codemode.js_runtime.models import ExecEvent


@dataclass(frozen=True, slots=True)
class NestedCall:
    """One ``tools.NAME(args)`` call a program made."""

    cell_id: str  # the program making it
    name: str  # the name the delegate knows it by ("shell", "mcp__srv__echo")
    args: object  # the program's arguments, parsed JSON, not validated


class ToolNames(Protocol):
    """The tools a program may call (a tool registry is one; so is ``ToolSet``)."""

    def flat_names(self) -> list[str]:
        """Names called as ``tools.NAME``."""
        ...

    def namespaces(self) -> dict[str, dict[str, str]]:
        """``{NS: {NAME: delegate name}}`` for tools called as ``tools.NS.NAME``."""
        ...


@dataclass(frozen=True)
class ToolSet:
    """``ToolNames`` as plain data."""

    names: tuple[str, ...] = ()
    spaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def flat_names(self) -> list[str]:
        return list(self.names)

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {ns: dict(members) for ns, members in self.spaces.items()}


class Delegate(Protocol):
    """The session owner's side: runs nested calls, hears notifications."""

    async def call_tool(self, call: NestedCall) -> object:
        """Run one nested call; its JSON-able result, or raise ``ToolError``."""
        ...

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        """A cell started, printed, sent a host event, started or finished a call.
        Must not block."""
        ...
