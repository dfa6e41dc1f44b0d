"""A tool's traits live on its definition, and every surface reads them from there.

The event item a call becomes, its ACP kind, its classic-dialect text and what
`interpreter tools` prints are each checked against a built-in tool, an emulated
harness's tool and an embedder's own tool that no module has ever heard of by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ToolCallStart
from agent_support import provider_flags, run_cli
from pydantic import BaseModel

from codemode.acp.updates import UpdateMapper
from codemode.agent.events import (
    CommandExecutionItem,
    ItemCompleted,
    ItemStarted,
    TodoListItem,
    ToolCallItem,
)
from codemode.agent.runner import ToolRunner
from codemode.assembly.toolset import session_registry
from codemode.harnesses.catalog import get_harness
from codemode.harnesses.native import NativeHarness
from codemode.providers.base import ToolCall
from codemode.tools.base import StrictArgs, Tool, ToolResult, define_tool
from codemode.tools.context import ToolContext
from codemode.tools.registry import ToolRegistry
from codemode_testkit.scripted_server import ScriptedModelServer


class ForecastArgs(StrictArgs):
    city: str


class Forecast(ToolResult):
    city: str
    celsius: int


async def _forecast(args: BaseModel, ctx: ToolContext) -> Forecast:
    assert isinstance(args, ForecastArgs)
    return Forecast(city=args.city, celsius=21)


# An embedder's tool: its name appears in no table, list or branch of the package.
FORECAST = Tool(
    name="forecast_for",
    description="The weather in a city.",
    args_model=ForecastArgs,
    result_model=Forecast,
    handler=_forecast,
    effects=frozenset({"network"}),
    acp_kind="fetch",
    render=lambda r: f"{r['city']}: {r['celsius']} °C",
)


class JobArgs(StrictArgs):
    command: str


async def _job(args: BaseModel, ctx: ToolContext) -> dict[str, Any]:
    assert isinstance(args, JobArgs)
    return {"exit_code": 0, "output": f"queued {args.command}"}


# An embedder's tool that runs commands somewhere else: shown as a command.
REMOTE_JOB = Tool(
    name="remote_job",
    description="Run a command on the build farm.",
    args_model=JobArgs,
    result_model=None,
    handler=_job,
    effects=frozenset({"execute", "network"}),
    item="command_execution",
    acp_kind="execute",
)


def _runner(registry: ToolRegistry, tmp_path: Path, events: list[BaseModel]) -> ToolRunner:
    return ToolRunner(registry, ToolContext(workspace=tmp_path), events.append)


async def _lookup(term: str) -> dict[str, str]:
    """Look a term up."""
    return {"term": term}


def _tool(registry: ToolRegistry, name: str) -> Tool:
    tool = registry.get(name)
    assert tool is not None, name
    return tool


def _started(events: list[BaseModel]) -> list[Any]:
    return [e.item for e in events if isinstance(e, ItemStarted)]


# --- the definition ----------------------------------------------------------------------


def test_effects_and_their_one_word_summary_agree() -> None:
    assert FORECAST.effect == "run" and REMOTE_JOB.effect == "run"
    registry = session_registry()
    assert _tool(registry, "read_file").effects == frozenset({"read"})
    assert _tool(registry, "write_file").effect == "write"
    assert _tool(registry, "shell").effect_set == frozenset({"execute"})
    legacy = Tool("t", "", JobArgs, None, _job, effect="read")  # the older spelling
    assert legacy.effect_set == frozenset({"read"}) and legacy.effects == frozenset()
    # dataclasses.replace of the summary alone works (as tests and embedders write it)
    from dataclasses import replace

    assert replace(define_tool(_lookup), effect="write").effect_set == frozenset({"write"})
    with pytest.raises(ValueError, match="contradicts"):
        Tool("t", "", JobArgs, None, _job, effect="read", effects=frozenset({"write"}))


# --- event items ---------------------------------------------------------------------------


async def test_item_kind_comes_from_the_trait(tmp_path: Path) -> None:
    events: list[BaseModel] = []
    runner = _runner(ToolRegistry([FORECAST, REMOTE_JOB]), tmp_path, events)
    try:
        forecast = await runner.call_tool("forecast_for", {"city": "Oslo"})
        job = await runner.call_tool("remote_job", {"command": "make test"})
    finally:
        runner.close()
    assert forecast.ok and job.ok
    first, second = _started(events)
    assert isinstance(first, ToolCallItem) and first.name == "forecast_for"
    assert isinstance(second, CommandExecutionItem) and second.command == "make test"
    done = [e.item for e in events if isinstance(e, ItemCompleted)]
    assert done[1].aggregated_output == "queued make test" and done[1].exit_code == 0


async def test_an_emulated_todo_list_is_shown_as_the_plan_it_stands_for(tmp_path: Path) -> None:
    """Claude Code's TodoWrite carries update_plan's traits; its todos become our plan
    through the adapter, not through a parser of todo shapes in the runner."""
    harness = get_harness("claude-code", "classic")
    events: list[BaseModel] = []
    runner = _runner(harness.registry(session_registry()), tmp_path, events)
    todos = [{"content": "Read the code", "status": "completed"},
             {"content": "Fix the bug", "status": "in_progress"}]
    try:
        out = await runner.call_tool("TodoWrite", {"todos": todos})
        await runner.call_tool("Bash", {"command": "true"})
    finally:
        runner.close()
    assert out.ok, out.error
    plan, command = _started(events)
    assert isinstance(plan, TodoListItem)
    assert [(e.text, e.status) for e in plan.items] == [
        ("Read the code", "completed"), ("Fix the bug", "in_progress")
    ]
    assert isinstance(command, CommandExecutionItem) and command.command == "true"


# --- ACP -----------------------------------------------------------------------------------


def _start_kind(mapper: UpdateMapper, item: Any) -> str:
    (start,) = mapper.updates(ItemStarted(item=item))
    assert isinstance(start, ToolCallStart)
    return str(start.kind)


def test_acp_kind_comes_from_the_trait() -> None:
    registry = session_registry()
    registry.add(FORECAST)
    mapper = UpdateMapper("/w", registry)
    assert _start_kind(mapper, ToolCallItem(id="1", name="forecast_for")) == "fetch"
    assert _start_kind(mapper, ToolCallItem(id="2", name="read_file")) == "read"
    assert _start_kind(mapper, ToolCallItem(id="3", name="grep")) == "search"
    assert mapper.kind_for("forecast_for") == "fetch" and mapper.kind_for("nope") == "other"
    # A tool that changes its kind changes what the editor shows; nothing else to edit.
    from dataclasses import replace

    registry.add(replace(FORECAST, acp_kind="search"))
    assert _start_kind(mapper, ToolCallItem(id="4", name="forecast_for")) == "search"


def test_acp_approval_of_a_canonical_call_under_an_emulated_surface() -> None:
    """An approval names our shell; the session offers Bash: the kind and the waiting call
    are still found, through the adapter's definition."""
    surface = get_harness("claude-code", "classic").registry(session_registry())
    mapper = UpdateMapper("/w", surface)
    assert mapper.kind_for("shell") == "execute" and mapper.kind_for("write_file") == "edit"
    mapper.updates(ItemStarted(item=ToolCallItem(id="r", name="Read", arguments={})))
    mapper.updates(ItemStarted(item=CommandExecutionItem(id="c", command="git push")))
    mapper.updates(ItemStarted(item=ToolCallItem(id="w", name="Write", arguments={})))
    assert mapper.open_call_for("shell") == "c"
    assert mapper.open_call_for("write_file") == "w"
    assert mapper.open_call_for("read_file") == "r"


# --- classic-dialect text --------------------------------------------------------------------


async def test_an_embedders_renderer_makes_its_classic_text(tmp_path: Path) -> None:
    events: list[BaseModel] = []
    runner = _runner(ToolRegistry([FORECAST]), tmp_path, events)
    harness = NativeHarness("classic")
    try:
        harness.tool_specs(runner.registry)
        outcome = await harness.execute(
            ToolCall(id="c1", name="forecast_for", arguments='{"city": "Oslo"}'), runner
        )
    finally:
        runner.close()
    assert outcome.content == "Oslo: 21 °C"


async def test_the_editor_surface_renders_with_the_tool_that_answered(tmp_path: Path) -> None:
    """SWE-agent's str_replace_editor calls read_file or list_dir; the text is the one of
    the tool that answered (no guessing from the result's keys)."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.py").write_text("x = 1\n")
    harness = get_harness("swe-agent", "classic")
    events: list[BaseModel] = []
    runner = _runner(harness.registry(session_registry()), tmp_path, events)
    try:
        from codemode.harnesses.table import render_adapted

        args = {"command": "view", "path": "d"}
        listed = await runner.call_tool("str_replace_editor", args)
        read_args = {"command": "view", "path": "d/a.py"}
        read = await runner.call_tool("str_replace_editor", read_args)
        assert listed.ok and read.ok, (listed.error, read.error)
        assert render_adapted(runner, "str_replace_editor", args, listed.value) == "a.py"
        assert render_adapted(runner, "str_replace_editor", read_args, read.value) == "1\tx = 1"
    finally:
        runner.close()


# --- interpreter tools -----------------------------------------------------------------------


def _dts_body(dts: str) -> str:
    """The declarations a prompt carries (the standalone file, for `interpreter run`
    scripts, adds argv, console and print)."""
    return dts.split("/** Arguments given after the script name")[0].strip()


@pytest.mark.parametrize(("harness", "member"), [("native", "update_plan"),
                                                 ("claude-code", "TodoWrite")])
def test_tools_dts_is_what_a_code_mode_session_declares(
    harness: str, member: str, home: Path, work: Path
) -> None:
    listed = run_cli(["tools", "--harness", harness, "--code-mode", "--dts"], home=home, cwd=work)
    assert listed.code == 0, listed.stderr
    assert f"  {member}(args" in listed.stdout
    script = [{"text": "nothing to do"}]
    with ScriptedModelServer(script) as server:
        ran = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--harness", harness,
             "--code-mode", "hi"], home=home, cwd=work,
        )
    assert ran.code == 0, ran.stderr
    exec_tool = server.requests[0].body["tools"][0]["function"]
    assert exec_tool["name"] == "exec"
    assert _dts_body(listed.stdout) in exec_tool["description"]


@pytest.mark.parametrize("harness", ["native", "opencode"])
def test_tools_json_is_what_the_wire_sends(harness: str, home: Path, work: Path) -> None:
    listed = run_cli(["tools", "--harness", harness, "--classic", "--json"], home=home, cwd=work)
    assert listed.code == 0, listed.stderr
    schemas = json.loads(listed.stdout)
    script = [{"text": "done"}]
    with ScriptedModelServer(script) as server:
        ran = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--harness", harness, "hi"],
            home=home, cwd=work,
        )
    assert ran.code == 0, ran.stderr
    sent = [t["function"] for t in server.requests[0].body["tools"]]
    assert schemas == sent
    assert all("title" not in json.dumps(s["parameters"]) for s in schemas if harness == "native")
    if harness == "native":
        patch = next(s for s in schemas if s["name"] == "apply_patch")
        assert patch["parameters"]["required"] == ["input"]


def test_tools_rejects_an_unknown_harness_and_a_missing_dialect(home: Path, work: Path) -> None:
    unknown = run_cli(["tools", "--harness", "nope"], home=home, cwd=work)
    assert unknown.code == 2 and "unknown harness 'nope'" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_define_tool_takes_the_traits_too() -> None:
    from dataclasses import replace

    tool = define_tool(
        _lookup, name="lookup", effects=frozenset({"read"}), acp_kind="search",
        render=lambda r: r["term"],
    )
    assert tool.effect == "read" and tool.acp_kind == "search" and tool.item == "tool_call"
    assert tool.text({"term": "x"}) == "x"
    assert tool.text({"other": 1}) is None  # not its shape: shown as JSON
    broken = replace(tool, render=lambda r: str(1 / 0))
    assert broken.text({"term": "x"}) is None
    mapper = UpdateMapper("/w", ToolRegistry([tool]))
    assert _start_kind(mapper, ToolCallItem(id="1", name="lookup")) == "search"
