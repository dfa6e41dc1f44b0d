"""``interpreter providers`` and ``interpreter models PROVIDER``: the catalog (and the
user's [model_providers] tables over it) as readable tables."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from codemode.providers.catalog import provider_models, provider_names, resolve_provider

# How the internal wire names read to a user (the config's own names).
_WIRE_SHOWN = {"anthropic": "messages"}


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


def providers_table(
    user_tables: Mapping[str, Mapping[str, Any]],
    current: str | None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """One line per provider: name, wire, key variable, whether it is set, model count."""
    environ = os.environ if environ is None else environ
    rows = []
    for name in provider_names(user_tables):
        try:
            info = resolve_provider(name, user_tables).info
        except ValueError:
            info = None
        if info is None:
            rows.append([" ", name, "?", "?", "invalid table", "", ""])
            continue
        variable = info.key_variable
        if not variable:
            state = "not needed"
        else:
            state = "set" if environ.get(variable, "").strip() else "not set"
        count = len(provider_models(name))
        rows.append([
            "*" if name == current else " ",
            name,
            _WIRE_SHOWN.get(info.wire_api, info.wire_api),
            variable or "-",
            state,
            str(count) if count else "-",
            info.description,
        ])
    headers = [" ", "PROVIDER", "WIRE", "KEY VARIABLE", "KEY", "MODELS", "DESCRIPTION"]
    return table(headers, rows)


def models_table(name: str) -> str:
    """The catalog's models of provider ``name``: context window, reasoning, tools, input."""
    rows = []
    for facts in sorted(provider_models(name), key=lambda f: f.id):
        window = f"{facts.context_window:,}" if facts.context_window else "?"
        rows.append([
            facts.id,
            window,
            "yes" if facts.reasoning else "no",
            "yes" if facts.tool_calling else "no",
            "+".join(facts.input),
        ])
    return table(["MODEL", "CONTEXT", "REASONING", "TOOLS", "INPUT"], rows)
