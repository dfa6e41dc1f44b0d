"""Environment hygiene: subprocesses do not inherit credentials meant for model providers."""

from __future__ import annotations

import fnmatch
import functools
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
    return _withheld(name, tuple(deny), tuple(allow))


# Every command passes the same few dozen names through the same patterns: remembered,
# that is a dictionary lookup instead of a dozen fnmatch calls per name (bounded, so a
# process whose environment keeps changing cannot grow it without end).
@functools.lru_cache(maxsize=4096)
def _withheld(name: str, deny: tuple[str, ...], allow: tuple[str, ...]) -> bool:
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
    allow, deny = tuple(allow), tuple(deny)
    return {k: v for k, v in env.items() if not _withheld(k, deny, allow)}
