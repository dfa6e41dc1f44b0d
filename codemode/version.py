"""The installed package's version, as every surface reports it (MCP serverInfo, ACP
agentInfo): what pip installed, so a release and its metadata never disagree."""

from __future__ import annotations

# The source tree's version (pyproject.toml says the same); `codemode.__version__` too.
__version__ = "0.1.0"

# Found once a process (and once for every warm run: the warm server asks before it
# forks them, ``codemode.launch.serve``). A memo, not ``functools.cache``: this module is
# imported by the launcher, and functools with what it imports is ~1.5 ms of its start.
_found: list[str] = []


def package_version() -> str:
    """The distribution's version; the source tree's ``__version__`` when not installed."""
    if not _found:
        # lazy: importlib.metadata is slow to import, and its search costs ~5 ms
        from importlib.metadata import PackageNotFoundError, version

        try:
            _found.append(version("codemode"))
        except PackageNotFoundError:
            _found.append(__version__)
    return _found[0]
