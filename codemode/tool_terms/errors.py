"""Errors every layer raises: a leaf module, so the sandbox can report a refused call in
the tools' own terms without importing the tools package (which imports the sandbox)."""

from __future__ import annotations


class ToolError(Exception):
    """A failure a tool reports to its caller; the message is shown to the program as-is.

    Handlers raise this for expected failures (missing file, path outside the
    workspace). Any other exception is reported too, but as ``TypeName: message``.
    """
