"""codemode: a terminal coding agent built around code mode.

Importing the package is cheap: ``ToolHost`` and friends load on first use, so
``interpreter --help`` never pulls in a JavaScript engine. It patches nothing in the
importing process (no import hook, no module swapped): the `interpreter` command's own
start-up work is ``codemode.process.entry``'s.
"""

from __future__ import annotations

from codemode.version import __version__ as __version__

# Not ``typing.TYPE_CHECKING``: the launcher (``codemode.launch``) imports this package
# first, and ``typing`` is ~5 ms of its start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from codemode.host import ToolHost
    from codemode.js_runtime.models import ExecResult, Limits

__all__ = ["ExecResult", "Limits", "ToolHost", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "ToolHost":
        from codemode.host import ToolHost  # lazy: the host loads the engines

        return ToolHost
    if name in ("ExecResult", "Limits"):
        from codemode.js_runtime import models  # lazy: pydantic models, on first use

        return getattr(models, name)
    raise AttributeError(f"module 'codemode' has no attribute {name!r}")
