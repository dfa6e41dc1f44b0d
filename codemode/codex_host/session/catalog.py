"""Tool catalog revisions (Codex 0.171): a client whose session says it supports them
sends the tool list once with a revision number, and later executes name the revision
with no list (gRPC ``ExecuteRequest.catalog_revision``; framed, with the capability
``tool-catalog-revision-v1``, the execute's ``catalog_revision``).

An execute that carries tools records them under its revision; one that carries none
and names a revision the session holds gets that revision's tools; one naming a
revision the session does not hold gets none (an empty first list is a catalog with no
tools, not an error). A session keeps its last ``KEPT`` revisions: what one client can
make the host hold is bounded.
"""

from __future__ import annotations

from codemode.codex_host.session.model import ToolSpec

KEPT = 8


class ToolCatalog:
    """One session's tool lists by revision."""

    def __init__(self) -> None:
        self._revisions: dict[int, list[ToolSpec]] = {}

    def tools(self, revision: int | None, given: list[ToolSpec]) -> list[ToolSpec]:
        """The tools an execute runs with."""
        if revision is None:
            return given
        if given:
            self._revisions.pop(revision, None)
            self._revisions[revision] = given
            while len(self._revisions) > KEPT:
                del self._revisions[next(iter(self._revisions))]
            return given
        return self._revisions.get(revision, [])
