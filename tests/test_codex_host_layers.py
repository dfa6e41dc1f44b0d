"""The Codex host is a client of the runtime's session API, not a second session layer:
its cells are the runtime's, each exec's calls and notifications reach that exec's own
delegate (no context variable routes them), outcomes are the runtime's, and what a
program says to the host travels on the runtime's typed channel, not on console levels.
Read from the source (the behaviour is what tests/test_codex_host_*.py drive)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "codemode"
CODEX = PACKAGE / "codex_host"


def _modules(folder: Path) -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE.parent)): ast.parse(path.read_text())
        for path in sorted(folder.rglob("*.py"))
    }


def test_no_context_variable_routes_the_hosts_calls() -> None:
    found = [
        name
        for name, tree in _modules(CODEX).items()
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and node.module == "contextvars")
        or (isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names))
    ]
    assert found == []


def test_the_host_defines_no_cells_outcomes_or_delegates_of_its_own() -> None:
    """The runtime's ``Cell``, ``Outcome`` (``Completed | Yielded | Terminated``),
    ``NestedCall`` and ``Delegate`` are the only ones."""
    second = {"Cell", "Outcome", "NestedCall", "Delegate", "CodeSession"}
    found = [
        f"{name}: {node.name}"
        for name, tree in _modules(CODEX).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name in second
    ]
    assert found == []


def test_every_exec_runs_with_its_own_delegate_and_codexs_yield_rule() -> None:
    calls = [
        node
        for tree in _modules(CODEX).values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "execute"
    ]
    assert calls, "the host runs no program on the runtime's session"
    for call in calls:
        keywords = {k.arg: k.value for k in call.keywords}
        assert "delegate" in keywords
        rule = keywords.get("yield_when")
        assert isinstance(rule, ast.Constant) and rule.value == "request"


def test_the_hosts_globals_speak_on_the_typed_channel_not_console_levels() -> None:
    script = (CODEX / "session" / "globals.js").read_text()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("//"))
    assert "__cm.hostChannel()" in code
    for level in ("log", "info", "warn", "error", "debug"):
        assert f".{level}" not in code.replace("JSON.", ""), level


def test_only_the_host_the_agent_and_doctor_build_runtime_sessions() -> None:
    """``CodeSession(`` is built by ``codemode.host`` (ToolHost and what sits on it, and
    the sessions of hosts whose tools are delegated: the Codex host takes its
    ``delegated_session``), the agent and doctor's probe (and the runtime itself)."""
    allowed = ("codemode/host/", "codemode/agent/", "codemode/doctor/", "codemode/js_runtime/")
    builders = sorted(
        name
        for name, tree in _modules(PACKAGE).items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "CodeSession"
        and not name.startswith(allowed)
    )
    assert builders == []
