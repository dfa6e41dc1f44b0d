"""Which harnesses exist, and the one a session uses."""

from __future__ import annotations

from codemode.harnesses.base import Dialect, Harness


class UnknownHarnessError(ValueError):
    pass


def harness_names() -> list[str]:
    return ["native"]


def get_harness(name: str, dialect: Dialect) -> Harness:
    """The harness called ``name`` in ``dialect``."""
    if name == "native":
        from codemode.harnesses.native import NativeHarness

        return NativeHarness(dialect)
    raise UnknownHarnessError(f"unknown harness {name!r} (available: {', '.join(harness_names())})")
