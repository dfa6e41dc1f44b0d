"""codemode: a terminal coding agent built around code mode.

Importing the package is cheap: ``ToolHost`` and friends load on first use, so
``interpreter --help`` never pulls in a JavaScript engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codemode import httpx_cli

__version__ = "0.1.0"

# httpx's own command line (rich, pygments) is imported only if something runs it.
httpx_cli.defer()

if TYPE_CHECKING:
    from codemode.host import ToolHost
    from codemode.js_runtime.models import ExecResult, Limits

__all__ = ["ExecResult", "Limits", "ToolHost", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "ToolHost":
        from codemode.host import ToolHost

        return ToolHost
    if name in ("ExecResult", "Limits"):
        from codemode.js_runtime import models

        return getattr(models, name)
    raise AttributeError(f"module 'codemode' has no attribute {name!r}")
