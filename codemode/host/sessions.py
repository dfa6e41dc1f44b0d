"""Runtime sessions for programs whose hosts hold no tools of their own.

A ``ToolHost`` builds the session its programs run in (``tool_host.py``). Two kinds of
host run programs in a session no single host owns, each program with a delegate and
tools of its own (``CodeSession.execute(..., delegate=...)``):

- ``shared_session``: the programs of several ``ToolHost``s in turn (a batch worker's
  repositories: ``ToolHost.from_parts(..., session=...)``);
- ``delegated_session``: a host whose tools are all delegated to its client, which
  runs them (the Codex code-mode host: every nested call goes back to Codex), with the
  globals its programs see set up by ``setup_scripts`` in each fresh isolate.

Neither keeps anything of one program's for the next (not persistent, no delegate or
globals of its own). This module imports only the runtime, so such a host pays for no
tool, sandbox or hook at its start (``codemode.host`` loads ``ToolHost`` only when asked
for it).
"""

from __future__ import annotations

from collections.abc import Sequence

from codemode.js_runtime.models import Limits
from codemode.js_runtime.session import CodeSession


def shared_session(*, engine: str, limits: Limits) -> CodeSession:
    """A code session for the programs of several hosts in turn: nothing of one host's
    reaches the next."""
    return CodeSession(limits=limits, engine=engine, persistent=False)


def delegated_session(
    *, engine: str, limits: Limits, setup_scripts: Sequence[str] = ()
) -> CodeSession:
    """A code session for a host whose every tool call goes to a delegate given with
    each program; ``setup_scripts`` run in each program's fresh isolate before it (the
    host's globals)."""
    return CodeSession(
        limits=limits, engine=engine, persistent=False, setup_scripts=list(setup_scripts)
    )
