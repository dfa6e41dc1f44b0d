"""The installed package's version, as every surface reports it (MCP serverInfo, ACP
agentInfo): what pip installed, so a release and its metadata never disagree."""

from __future__ import annotations

from functools import cache


@cache
def package_version() -> str:
    """The distribution's version; the source tree's ``__version__`` when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codemode")
    except PackageNotFoundError:
        from codemode import __version__

        return __version__
