"""What an entry point hands the composition root: the command line's choices
(``SessionOptions``) and the pieces only it can supply (``SessionSpec``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from codemode.agent.rollout import RecordedSession
    from codemode.providers.base import Provider
    from codemode.sandbox.approvals.approval import Approver
    from codemode.tools.client import ToolClient


@dataclass
class SessionOptions:
    """What the command line may set; None means "from the config"."""

    cwd: Path
    overrides: list[str] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    code_mode: bool | None = None
    harness: str | None = None
    max_turns: int | None = None
    sandbox_mode: str | None = None
    approval_policy: str | None = None
    full_auto: bool = False
    # Writable roots beyond the workspace (exec --add-dir).
    writable_roots: list[Path] = field(default_factory=list)


@dataclass
class SessionSpec:
    """What differs between entry points, beyond the options: everything a session
    needs is given here, so nothing is patched into it after it is built."""

    # Every event the session emits goes to each of these (printer, renderer, ACP).
    listeners: list[Callable[[BaseModel], None]] = field(default_factory=list)
    # A provider object in place of the configured one (a replay, tests), and the
    # name its session is recorded under.
    provider: Provider | None = None
    provider_name: str | None = None
    # A recorded session to continue in its own file.
    resume: RecordedSession | None = None
    # False: no session file (benchmarks).
    record: bool = True
    # Who is asked when a command needs approval (the terminal, the ACP client); None:
    # nobody, so such a command is refused.
    approver: Approver | None = None
    # The user's editor (ACP): file reads and writes go through it.
    client: ToolClient | None = None
    # The session's id, when the entry point must know it before the session exists
    # (ACP's approver names it); a resumed session keeps its recorded id.
    session_id: str | None = None
    # exec --output-schema: the final answer must match this JSON schema.
    output_schema: dict[str, Any] | None = None
    # The isolate when the config names none.
    default_engine: str = "quickjs"
    # Run project hooks nobody trusted yet (exec --trust-project-hooks), and what the
    # one notice about untrusted ones adds (how to review them on this surface).
    run_untrusted_hooks: bool = False
    untrusted_hooks_hint: str = ""
