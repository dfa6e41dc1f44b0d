"""Which harnesses exist, the one a session uses, and the default per model family."""

from __future__ import annotations

from dataclasses import dataclass

from codemode.harnesses.base import Dialect, Harness


class UnknownHarnessError(ValueError):
    pass


# Model family (ProviderInfo.family) -> the harness its models were trained in.
FAMILY_DEFAULTS = {
    "kimi": "kimi-code", "qwen": "qwen-code", "anthropic": "claude-code", "glm": "zcode"
}
DEFAULT_HARNESS = "native"


@dataclass(frozen=True)
class HarnessInfo:
    name: str
    dialects: tuple[str, ...]
    description: str


def harness_names() -> list[str]:
    from codemode.harnesses.spec import table_names

    return ["native", *table_names()]


def harness_infos() -> list[HarnessInfo]:
    """Every harness with its dialects and a one-line description."""
    from codemode.harnesses.spec import load_table, table_names

    infos = [
        # Its tools are the session's own (`interpreter harness list` names them).
        HarnessInfo("native", ("classic", "code"), "codemode's own prompt and tools")
    ]
    for name in table_names():
        table = load_table(name)
        infos.append(HarnessInfo(name, tuple(table.dialects), " ".join(table.description.split())))
    return infos


def default_harness(family: str | None) -> str:
    """The harness for a model family when neither --harness nor config names one."""
    return FAMILY_DEFAULTS.get((family or "").lower(), DEFAULT_HARNESS)


def get_harness(name: str, dialect: Dialect) -> Harness:
    """The harness called ``name`` in ``dialect``."""
    if name == "native":
        from codemode.harnesses.native import NativeHarness

        return NativeHarness(dialect)
    from codemode.harnesses.spec import load_table, table_names

    if name not in table_names():
        from codemode.harnesses.repair import closest_name

        hint = closest_name(name, harness_names())
        raise UnknownHarnessError(
            f"unknown harness {name!r}{f' (did you mean {hint}?)' if hint else ''}; "
            f"available: {', '.join(harness_names())}"
        )
    table = load_table(name)
    if dialect not in table.dialects:
        raise UnknownHarnessError(
            f"harness {name!r} has no {dialect} dialect (it has: {', '.join(table.dialects)})"
        )
    from codemode.harnesses.table import TableHarness, TextHarness

    if table.parser == "function_calls":
        return TableHarness(table, dialect)
    if table.parser == "terminus":
        from codemode.harnesses.terminus import TerminusHarness

        return TerminusHarness(table, dialect)
    return TextHarness(table, dialect)
