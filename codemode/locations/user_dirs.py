"""Where codemode keeps its own things, from the environment: one expansion for all.

Every module that needs codemode's home, its cache or the user's configuration folder
asks here, so that ``CODEMODE_HOME=~/cm`` (a ``~`` the shell did not expand, as in a
systemd unit or a ``.env`` file) means the same folder to the config loader, the rules
loader, the helpers cache and the sandbox's protection of them. A folder named by a
relative path is taken relative to the working folder at the time, once (``abspath``),
except the ``XDG_*`` ones, which the XDG spec says to ignore when relative.
"""

from __future__ import annotations

import os
from pathlib import Path


def env_path(name: str, *, relative_ok: bool = True) -> Path | None:
    """The folder the variable ``name`` names, ``~`` expanded and made absolute; None
    when it is unset or empty (or relative and ``relative_ok`` is False)."""
    value = os.environ.get(name)
    if not value:
        return None
    expanded = os.path.expanduser(value)
    if not os.path.isabs(expanded) and not relative_ok:
        return None
    return Path(os.path.abspath(expanded))


def home() -> Path:
    """The user's home folder (``$HOME``, else the password database)."""
    return Path(os.path.expanduser("~"))


def codemode_home() -> Path:
    """Where user data lives: ``$CODEMODE_HOME``, else ``~/.codemode``."""
    return env_path("CODEMODE_HOME") or home() / ".codemode"


def cache_home() -> Path:
    """Build products and downloads: ``$CODEMODE_CACHE``, else
    ``$XDG_CACHE_HOME/codemode``, else ``~/.cache/codemode``."""
    own = env_path("CODEMODE_CACHE")
    if own is not None:
        return own
    return (env_path("XDG_CACHE_HOME", relative_ok=False) or home() / ".cache") / "codemode"


def config_home() -> Path:
    """The user's configuration folder: ``$XDG_CONFIG_HOME``, else ``~/.config``."""
    return env_path("XDG_CONFIG_HOME", relative_ok=False) or home() / ".config"
