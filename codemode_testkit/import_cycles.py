"""An import-linter contract that no module imports itself back through others
(``module_acyclic`` in pyproject.toml's ``[tool.importlinter]``).

import-linter's own ``acyclic_siblings`` contract compares the *siblings* of each
package, each squashed with its descendants; a package's ``__init__`` is their parent,
not a sibling, so a cycle through it (``store`` → ``store.commit`` → ``store``) is never
seen, type-only or not. This contract looks at the graph module by module: every
strongly connected component of more than one module (or a module importing itself) is
a cycle, whatever kind of import closes it (the graph holds the ``TYPE_CHECKING``
imports too: ``exclude_type_checking_imports = false``).
"""

from __future__ import annotations

from collections.abc import Iterable

import grimp
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class ModuleCyclesContract(Contract):
    """No import cycle between any two modules under ``packages``."""

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots: list[str] = list(self.packages)  # type: ignore[call-overload]
        ours = sorted(m for m in graph.modules if _under(m, roots))
        cycles = [_one_cycle(graph, part) for part in _components(graph, ours)]
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error("A cycle between modules (type-only imports count):")
            output.print_error("    " + " -> ".join([*cycle, cycle[0]]), bold=False)
            output.new_line()


def _under(module: str, roots: Iterable[str]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def _components(graph: grimp.ImportGraph, modules: list[str]) -> list[list[str]]:
    """The strongly connected components that are cycles (Tarjan's, iterative: the
    graph is deep enough to overflow Python's stack when recursive)."""
    inside = set(modules)
    successors = {
        m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in inside)
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in modules:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, next_child = work.pop()
            if next_child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            children = successors[node]
            if next_child < len(children):
                work.append((node, next_child + 1))
                child = children[next_child]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                part: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1 or node in successors[node]:
                    found.append(sorted(part))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _one_cycle(graph: grimp.ImportGraph, part: list[str]) -> list[str]:
    """One concrete cycle through the component's first module, for the report."""
    first = part[0]
    members = set(part)
    after = next(n for n in sorted(graph.find_modules_directly_imported_by(first)) if n in members)
    if after == first:
        return [first]
    back = graph.find_shortest_chain(importer=after, imported=first)
    return [first, *back[:-1]] if back else [first, after]
