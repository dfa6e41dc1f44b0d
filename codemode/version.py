"""The installed package's version, as every surface reports it (MCP serverInfo, ACP
agentInfo): what pip installed, so a release and its metadata never disagree."""

from __future__ import annotations

from functools import cache

# The source tree's version (pyproject.toml says the same); `codemode.__version__` too.
__version__ = "0.1.0"


@cache
def package_version() -> str:
    """The distribution's version; the source tree's ``__version__`` when not installed."""
    # lazy: importlib.metadata is slow to import
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("codemode")
    except PackageNotFoundError:
        return __version__
