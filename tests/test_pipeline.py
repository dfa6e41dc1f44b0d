"""The call pipeline (codemode.tools.pipeline): the order interceptors meet a call in,
what each stage does, and that every surface (runner, ToolHost, dry runs) goes through it.
Real registries, sandbox sessions, isolates and files; nothing under test is mocked."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from codemode.agent.events import ItemCompleted, ItemStarted
from codemode.agent.runner import ToolRunner
from codemode.host import ToolHost
from codemode.js_runtime import Completed
from codemode.js_runtime.models import Limits
from codemode.sandbox.approvals.approval import ApprovalChoice, ApprovalRequest
from codemode.sandbox.session import SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, ToolError, builtin_registry
from codemode.tools.base import Tool, Trust, define_tool
from codemode.tools.dry_run import DryRun, dry_run_registry
from codemode.tools.pipeline import STAGES, Call, Next, Pipeline
from codemode.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "codemode-home"
    monkeypatch.setenv("CODEMODE_HOME", str(h))
    return h


class Seen:
    """A test interceptor: records what reaches it, then passes the call on."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    async def __call__(self, call: Call, next_: Next) -> Any:
        self.calls.append(call)
        return await next_(call)

    def names(self) -> list[str]:
        return [c.name for c in self.calls]


def _outside_tool(trust: Trust) -> Tool:
    async def echo(text: str) -> str:
        """Echo, as an MCP server's tool would."""
        return text

    return dataclasses.replace(define_tool(echo), name="mcp__srv__echo", trust=trust)


def _registry(*interceptors: Any) -> ToolRegistry:
    registry = builtin_registry()
    registry.add(_outside_tool("untrusted"))
    for interceptor in interceptors:
        registry.use(interceptor)
    return registry


async def test_stages_run_in_their_order_whatever_order_they_were_added() -> None:
    order: list[str] = []

    def mark(label: str) -> Any:
        async def interceptor(call: Call, next_: Next) -> Any:
            order.append(label)
            return await next_(call)

        return interceptor

    pipeline = Pipeline()
    for stage in reversed(STAGES):
        pipeline.use(mark(stage), stage)
    pipeline.use(mark("embedder-2"))

    async def last(call: Call) -> str:
        order.append("tool")
        return "done"

    call = Call(name="x", tool=None, args={}, ctx=ToolContext(workspace=ROOT))
    assert await pipeline.run(call, last, around=(mark("around"),)) == "done"
    assert order == ["around", "report", "gate", "hooks", "policy", "embedder", "embedder-2",
                     "route", "tool"]
    with pytest.raises(ValueError, match="unknown stage"):
        pipeline.use(mark("x"), "later")  # type: ignore[arg-type]


async def test_an_embedder_interceptor_sees_only_calls_the_policy_let_through(
    tmp_path: Path,
) -> None:
    seen = Seen()
    registry = _registry(seen)
    # read-only: an MCP tool without trust is refused by the session's policy.
    strict = ToolContext(workspace=tmp_path, sandbox=SandboxSession(
        tmp_path, SandboxSettings(sandbox_mode="read-only")))
    with pytest.raises(ToolError, match="is refused: the sandbox mode is read-only"):
        await registry.invoke("mcp__srv__echo", {"text": "hi"}, strict)
    assert seen.names() == []
    (tmp_path / "f.txt").write_text("a\n")
    await registry.invoke("read_file", {"path": "f.txt"}, strict)
    assert seen.names() == ["read_file"]

    # Asked: a denial never reaches the interceptor, an approval does.
    answers: list[ApprovalChoice] = ["deny", "once"]
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> ApprovalChoice:
        asked.append(request)
        return answers.pop(0)

    asking = ToolContext(workspace=tmp_path, sandbox=SandboxSession(
        tmp_path, SandboxSettings(sandbox_mode="workspace-write"), approver=approver))
    with pytest.raises(ToolError, match="the user declined the call"):
        await registry.invoke("mcp__srv__echo", {"text": "no"}, asking, program="P")
    assert seen.names() == ["read_file"]
    assert await registry.invoke("mcp__srv__echo", {"text": "yes"}, asking) == "yes"
    assert seen.names() == ["read_file", "mcp__srv__echo"]
    # The request is the one approval type, with the calling program on it.
    assert [r.program for r in asked] == ["P", None]
    assert asked[0].summary().startswith("srv.echo wants to run: tools.srv.echo(")


async def test_dry_run_blocks_writers_before_any_later_interceptor(tmp_path: Path) -> None:
    seen = Seen()
    registry = dry_run_registry(builtin_registry())
    registry.use(seen)
    dry = DryRun()
    ctx = ToolContext(workspace=tmp_path, dry_run=dry)
    for name, args in (
        ("shell", {"command": "touch made.txt"}),
        ("shell", {"command": "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: p.txt\n"
                              "+x\n*** End Patch\nEOF"}),
    ):
        with pytest.raises(ToolError, match=r"tools\.shell is refused in a dry run"):
            await registry.invoke(name, args, ctx)
    await registry.invoke("write_file", {"path": "w.txt", "content": "new\n"}, ctx)
    assert seen.names() == ["write_file"]
    assert not (tmp_path / "made.txt").exists() and not (tmp_path / "p.txt").exists()
    assert not (tmp_path / "w.txt").exists()
    assert dry.changed_paths(tmp_path) == ["w.txt"]
    # The same registry outside a dry run lets the shell through.
    await registry.invoke("shell", {"command": "touch made.txt"}, ToolContext(workspace=tmp_path))
    assert (tmp_path / "made.txt").exists()


async def test_a_shell_call_that_only_applies_a_patch_is_routed_after_the_embedders(
    tmp_path: Path,
) -> None:
    seen = Seen()
    registry = _registry(seen)
    command = (
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\nEOF"
    )
    result = await registry.invoke("shell", {"command": command}, ToolContext(workspace=tmp_path))
    assert result["exit_code"] == 0 and result["output"] == "A a.txt\n"
    assert (tmp_path / "a.txt").read_text() == "hello\n"
    assert seen.names() == ["shell"]  # an embedder saw the shell call it was
    # Bad arguments are the shell's own error, not a crash in the route.
    with pytest.raises(ToolError, match="timeout_ms"):
        await registry.invoke(
            "shell", {"command": command, "timeout_ms": "soon"}, ToolContext(workspace=tmp_path)
        )


def test_the_shell_and_the_patch_route_do_not_import_each_other_both_ways() -> None:
    def imported(path: Path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module is not None
        }

    assert "codemode.tools.patch.intercept" not in imported(ROOT / "codemode/tools/shell.py")
    assert "codemode.tools.shell" in imported(ROOT / "codemode/tools/patch/intercept.py")
    # ...nor the patch parser the route (which imports the engine, which parses).
    for module in ("lenient", "parser", "engine"):
        path = ROOT / f"codemode/tools/patch/{module}.py"
        assert "codemode.tools.patch.intercept" not in imported(path), module


def _runner(tmp_path: Path, events: list[BaseModel], registry: ToolRegistry) -> ToolRunner:
    return ToolRunner(
        registry, ToolContext(workspace=tmp_path), events.append, engine="quickjs",
        limits=Limits(timeout_s=30), yield_time_ms=30_000,
    )


async def test_reporting_files_each_programs_calls_under_its_own_item(tmp_path: Path) -> None:
    seen = Seen()
    events: list[BaseModel] = []
    runner = _runner(tmp_path, events, _registry(seen))
    (tmp_path / "f.txt").write_text("x\n")
    first = (
        "await Promise.all([tools.read_file({path: 'f.txt'}), tools.list_dir({path: '.'})]);"
        "return (await tools.shell({command: 'echo hi'})).output"
    )
    second = "return (await tools.read_file({path: 'f.txt'})).content"
    try:
        one, two = await runner.run_program(first), await runner.run_program(second)
        assert isinstance(one, Completed) and one.result.value == "hi\n"
        assert isinstance(two, Completed) and two.result.value == "x\n"
        outcome = await runner.call_tool("list_dir", {"path": "."})
        assert outcome.ok
        missing = await runner.call_tool("read_fil", {"path": "f.txt"})
    finally:
        runner.close()
    started = [e.item for e in events if isinstance(e, ItemStarted)]
    programs = [i.id for i in started if i.type == "code_execution"]
    assert len(programs) == 2
    nested = {(type(i).__name__, i.parent_id) for i in started if i.type != "code_execution"}
    assert nested == {
        ("ToolCallItem", programs[0]),
        ("CommandExecutionItem", programs[0]),
        ("ToolCallItem", programs[1]),
        ("ToolCallItem", None),
    }
    per_program = [
        sum(1 for i in started if getattr(i, "parent_id", None) == p) for p in programs
    ]
    assert per_program == [3, 1]
    # The interceptor saw the same parents, and the program source, on each call.
    assert [(c.name, c.parent_id, c.program) for c in seen.calls] == [
        ("read_file", programs[0], first),
        ("list_dir", programs[0], first),
        ("shell", programs[0], first),
        ("read_file", programs[1], second),
        ("list_dir", None, None),
        ("read_fil", None, None),
    ]
    assert seen.calls[-1].tool is None  # passed on, and refused by the last step
    # A misspelt name is still reported, as a failed call, and never reaches a tool.
    assert not missing.ok and "did you mean tools.read_file?" in (missing.error or "")
    done = [e.item for e in events if isinstance(e, ItemCompleted)]
    assert any(
        getattr(i, "name", "") == "read_fil" and getattr(i, "status", "") == "failed"
        for i in done
    )


async def test_tool_host_interceptors_refuse_change_and_see_the_program(tmp_path: Path) -> None:
    registry = builtin_registry()

    async def no_shell(call: Call, next_: Next) -> Any:
        if call.name == "shell":
            raise ToolError("tools.shell is switched off by the embedder")
        return await next_(call)

    async def shout(call: Call, next_: Next) -> Any:
        value = await next_(call)
        return value.upper() if call.name == "word" else value

    seen = Seen()
    host = ToolHost(tmp_path, registry=registry, interceptors=[seen, no_shell, shout])

    @host.tool
    async def word(text: str) -> str:
        """Return the text."""
        return text

    code = (
        "let refused;"
        "try { await tools.shell({command: 'true'}) } catch (e) { refused = e.message }"
        "return [await tools.word({text: 'quiet'}), refused]"
    )
    try:
        result = await host.execute(code)
    finally:
        host.close()
    assert result.ok, result.error
    assert result.value == ["QUIET", "tools.shell is switched off by the embedder"]
    assert [(c.name, c.program) for c in seen.calls] == [("shell", code), ("word", code)]
    assert registry.get("word") is None  # the caller's registry is left as it was
    assert len(registry.pipeline.chain()) == len(builtin_registry().pipeline.chain())


async def test_the_handler_gets_the_callers_context_naming_the_tool_and_program(
    tmp_path: Path,
) -> None:
    contexts: list[ToolContext] = []
    registry = ToolRegistry()

    @registry.tool
    async def probe() -> str:
        """Record the context."""
        return "ok"

    tool = registry.get("probe")
    assert tool is not None

    async def keep(args: BaseModel, ctx: ToolContext) -> str:
        contexts.append(ctx)
        return "ok"

    registry.add(dataclasses.replace(tool, handler=keep))
    ctx = ToolContext(workspace=tmp_path, writable_roots=[tmp_path / "extra"])
    await registry.invoke("probe", {}, ctx, program="return 1")
    await registry.invoke("probe", {}, ctx)
    first, second = contexts
    assert (first.tool_name, first.program, second.program) == ("probe", "return 1", None)
    assert ctx.tool_name is None and ctx.program is None  # the caller's is unchanged
    for made in contexts:
        assert {
            f.name: getattr(made, f.name)
            for f in dataclasses.fields(ToolContext)
            if f.name not in ("tool_name", "program")
        } == {
            f.name: getattr(ctx, f.name)
            for f in dataclasses.fields(ToolContext)
            if f.name not in ("tool_name", "program")
        }
