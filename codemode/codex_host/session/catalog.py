"""Tool catalog revisions (Codex 0.171): a client whose session says it supports them
sends the tool list once with a revision number, and later executes name the revision
with no list (gRPC ``ExecuteRequest.catalog_revision``; framed, with the capability
``tool-catalog-revision-v1``, the execute's ``catalog_revision``).

An execute that carries tools records them under its revision; one that carries none
and names a revision the session holds gets that revision's tools; one naming a
revision the session does not hold gets none (an empty first list is a catalog with no
tools, not an error). A session keeps its last ``KEPT`` revisions, and what a
connection's sessions keep together is bounded in bytes (``limits.CATALOGS_FOR_CLIENT``):
an execute whose list would pass it is refused (``LimitReached``), nothing kept.
"""

from __future__ import annotations

import sys
from typing import Any

from codemode.codex_host.session.limits import CATALOG_EACH, ConnectionCells
from codemode.codex_host.session.model import ToolSpec

KEPT = 8


class ToolCatalog:
    """One session's tool lists by revision, counted on its connection's account."""

    def __init__(self, account: ConnectionCells | None = None) -> None:
        self._revisions: dict[int, tuple[list[ToolSpec], int]] = {}  # tools, their cost
        self._account = account or ConnectionCells()

    def tools(self, revision: int | None, given: list[ToolSpec]) -> list[ToolSpec]:
        """The tools an execute runs with."""
        if revision is None:
            return given
        if not given:
            kept = self._revisions.get(revision)
            return kept[0] if kept is not None else []
        cost = catalog_cost(given)
        # What keeping it lets go: the revision it replaces, then the oldest past KEPT.
        others = [r for r in self._revisions if r != revision]
        dropped = others[: max(0, len(others) + 1 - KEPT)]
        if revision in self._revisions:
            dropped.append(revision)
        self._account.keep_catalog(cost, sum(self._revisions[r][1] for r in dropped))
        for r in dropped:
            del self._revisions[r]
        self._revisions[revision] = (given, cost)
        return given

    def clear(self) -> None:
        """The session ended: what it kept no longer counts."""
        self._account.keep_catalog(0, sum(cost for _, cost in self._revisions.values()))
        self._revisions.clear()


def catalog_cost(tools: list[ToolSpec]) -> int:
    """What keeping ``tools`` costs this process, in bytes (about)."""
    total = 0
    for tool in tools:
        total += CATALOG_EACH + sum(
            _size(v) for v in (tool.name, tool.tool_name, tool.namespace, tool.description)
        )
        total += _size(tool.input_schema) + _size(tool.output_schema)
    return total


def _size(value: Any) -> int:
    """A value's size: a string's or bytes' own; a framed schema's JSON value (nested
    lists and objects) walked without recursion, each element counted."""
    if value is None:
        return 0
    if isinstance(value, str | bytes):
        return sys.getsizeof(value)
    total, todo = 0, [value]
    while todo:
        item = todo.pop()
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return total
