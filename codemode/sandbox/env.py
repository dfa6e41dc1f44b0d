"""Environment hygiene: subprocesses do not inherit credentials meant for model providers."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

# Environment variables that look like credentials; subprocesses do not get them.
DEFAULT_ENV_DENY = (
    "*_API_KEY",
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_KEY",
    "*_ACCESS_KEY",
    "*_PASSWORD",
)


def is_withheld(name: str, deny: Iterable[str], allow: Iterable[str]) -> bool:
    upper = name.upper()
    if any(fnmatch.fnmatchcase(upper, a.upper()) for a in allow):
        return False
    return any(fnmatch.fnmatchcase(upper, d.upper()) for d in deny)


def scrub_environment(
    env: Mapping[str, str],
    *,
    allow: Iterable[str] = (),
    deny: Iterable[str] = DEFAULT_ENV_DENY,
) -> dict[str, str]:
    """``env`` without the variables whose names look like credentials (``*_API_KEY``,
    ``*_TOKEN``, ``*_SECRET``...), except those ``allow`` names."""
    allow, deny = list(allow), list(deny)
    return {k: v for k, v in env.items() if not is_withheld(k, deny, allow)}
