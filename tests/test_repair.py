"""Tolerant parsing: argument repair, calls recovered from text, programs unwrapped,
closest tool names; the exact-string edit tool and the adapter plumbing behind harnesses."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from codemode.harnesses.adapters import adapter_registry, model_from_schema
from codemode.harnesses.base import Actions
from codemode.harnesses.calls import function_call_actions
from codemode.harnesses.catalog import UnknownHarnessError, default_harness, get_harness
from codemode.harnesses.repair import (
    RECOVERED_PREFIX,
    ArgumentError,
    closest_name,
    recover_text_calls,
    repair_json,
    unwrap_program,
)
from codemode.harnesses.spec import load_table, table_names
from codemode.harnesses.table import parse_command_line
from codemode.providers.base import AssistantMessage, ToolCall, ToolSpec
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.edit import EDIT

# --- JSON repair -----------------------------------------------------------------------


def test_valid_json_is_untouched() -> None:
    assert repair_json('{"a": "it\'s, fine", "b": [1, 2]}') == {"a": "it's, fine", "b": [1, 2]}


def test_trailing_commas_are_dropped() -> None:
    assert repair_json('{"path": "a.py", "lines": [1, 2,],}') == {"path": "a.py", "lines": [1, 2]}


def test_single_quotes_become_double_quotes() -> None:
    assert repair_json("{'command': 'echo \"hi\"', 'n': 'it\\'s'}") == {
        "command": 'echo "hi"',
        "n": "it's",
    }


def test_raw_newlines_and_tabs_inside_strings_are_escaped() -> None:
    text = '{"content": "line one\nline two\n\tindented"}'
    assert repair_json(text) == {"content": "line one\nline two\n\tindented"}


def test_python_literals_and_unquoted_keys() -> None:
    assert repair_json("{replace_all: True, limit: None, ok: False}") == {
        "replace_all": True,
        "limit": None,
        "ok": False,
    }


def test_double_encoded_arguments_are_decoded() -> None:
    assert repair_json(json.dumps(json.dumps({"path": "x"}))) == {"path": "x"}


def test_fenced_arguments_are_unwrapped() -> None:
    assert repair_json('```json\n{"path": "x",}\n```') == {"path": "x"}


def test_hopeless_json_gets_a_precise_error() -> None:
    with pytest.raises(ArgumentError) as info:
        repair_json('{"path": "a.py" "limit": 3}', what="the arguments of Read")
    message = str(info.value)
    assert message.startswith("the arguments of Read are not valid JSON")
    assert "line 1 column 17" in message
    assert "limit" in message  # the text near the problem is quoted


# --- programs ----------------------------------------------------------------------------


def test_program_in_a_fence_is_unwrapped() -> None:
    assert unwrap_program("```javascript\nconsole.log(1)\n```") == "console.log(1)"


def test_program_sent_as_a_json_string_is_unwrapped() -> None:
    assert unwrap_program(json.dumps("```js\nreturn 2\n```")) == "return 2"


def test_program_in_a_code_object_inside_the_text() -> None:
    assert unwrap_program('{"code": "return 3"}') == "return 3"
    assert unwrap_program({"code": "return 4"}) == "return 4"


def test_program_of_the_wrong_type_is_an_error() -> None:
    with pytest.raises(ArgumentError, match="exec needs"):
        unwrap_program({"source": 5})


# --- names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "expected"),
    [("bash", "Bash"), ("read-file", "read_file"), ("ReadFile", "read_file"), ("Gerp", "Grep")],
)
def test_closest_name(typed: str, expected: str) -> None:
    assert closest_name(typed, ["Bash", "read_file", "Grep", "Edit"]) == expected


def test_no_close_name() -> None:
    assert closest_name("deploy_to_production", ["Bash", "Read"]) is None


# --- calls written into the text ---------------------------------------------------------

SCHEMAS = {
    "read_file": {"properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}},
    "shell": {"properties": {"command": {"type": "string"}}},
}


def test_hermes_tool_call_tags() -> None:
    text = (
        "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}"
        "\n</tool_call>\n<tool_call>{'name': 'shell', 'arguments': {'command': 'ls',}}</tool_call>"
    )
    calls, problem = recover_text_calls(text, SCHEMAS)
    assert problem is None
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("read_file", {"path": "a.py"}),
        ("shell", {"command": "ls"}),
    ]
    assert all(c.id.startswith(RECOVERED_PREFIX) for c in calls)


def test_qwen_xml_function_tags_are_typed_by_schema() -> None:
    text = (
        "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/x.py\n</parameter>\n"
        "<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>"
    )
    calls, _ = recover_text_calls(text, SCHEMAS)
    assert len(calls) == 1
    assert json.loads(calls[0].arguments) == {"path": "src/x.py", "limit": 20}


def test_json_block_naming_a_tool_is_a_call() -> None:
    text = 'I will run:\n```json\n{"name": "shell", "arguments": {"command": "pytest -q"}}\n```'
    calls, _ = recover_text_calls(text, SCHEMAS)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("shell", {"command": "pytest -q"})
    ]


def test_json_block_that_is_not_a_call_stays_an_answer() -> None:
    text = 'The config should be:\n```json\n{"name": "my-package", "version": "1.0.0"}\n```'
    calls, problem = recover_text_calls(text, SCHEMAS)
    assert calls == [] and problem is None


def test_unreadable_tool_call_tag_is_reported() -> None:
    calls, problem = recover_text_calls("<tool_call>{name: read_file, [}</tool_call>", SCHEMAS)
    assert calls == []
    assert problem is not None and "not valid JSON" in problem


def _actions(text: str, code: bool = False) -> Actions:
    specs = [ToolSpec(name=n, description="", parameters=s) for n, s in SCHEMAS.items()]
    return function_call_actions(AssistantMessage(text=text), specs, "NUDGE", code=code)


def test_empty_reply_gets_the_nudge_and_text_is_an_answer() -> None:
    assert _actions("  \n").reminder == "NUDGE"
    answer = _actions("All done: the tests pass.")
    assert answer.calls == [] and answer.reminder is None


def test_bad_tool_call_text_gets_a_reminder_naming_the_problem() -> None:
    reminder = _actions("<tool_call>{oops</tool_call>").reminder
    assert reminder is not None and "could not read your tool call" in reminder


def test_code_mode_reply_that_is_only_a_js_fence_is_a_program() -> None:
    actions = _actions("```js\nconsole.log(await tools.shell({command: 'ls'}))\n```", code=True)
    assert [c.name for c in actions.calls] == ["exec"]
    assert actions.calls[0].arguments.startswith("console.log(")


# --- the edit tool -----------------------------------------------------------------------


def _edit(tmp_path: Path, **args: object) -> object:
    return asyncio.run(EDIT.call(args, ToolContext(workspace=tmp_path)))


def test_edit_replaces_one_exact_occurrence(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    result = _edit(tmp_path, path="a.py", old_string="y = 2", new_string="y = 3")
    assert result == {"path": "a.py", "replacements": 1, "created": False}
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 3\n"


def test_edit_refuses_an_ambiguous_match_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("v = 1\nv = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        _edit(tmp_path, path="a.py", old_string="v = 1", new_string="v = 2")
    assert (tmp_path / "a.py").read_text() == "v = 1\nv = 1\n"
    _edit(tmp_path, path="a.py", old_string="v = 1", new_string="v = 2", replace_all=True)
    assert (tmp_path / "a.py").read_text() == "v = 2\nv = 2\n"


def test_edit_missing_text_hints_at_whitespace(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    with pytest.raises(ToolError, match="indentation"):
        _edit(tmp_path, path="a.py", old_string="  return 1  ", new_string="return 2")


def test_edit_with_empty_old_string_creates_a_file(tmp_path: Path) -> None:
    _edit(tmp_path, path="new/b.txt", old_string="", new_string="hello\n")
    assert (tmp_path / "new" / "b.txt").read_text() == "hello\n"


# --- tables and adapters -----------------------------------------------------------------


def test_every_table_loads_and_builds_its_adapters() -> None:
    for name in table_names():
        table = load_table(name)
        registry = adapter_registry(table, builtin_registry())
        assert registry.names()[: len(table.tools)] == [t.name for t in table.tools], name


def test_schema_models_alias_flag_names_and_forbid_unknown_fields() -> None:
    model = model_from_schema(
        "GrepArgs",
        {"properties": {"pattern": {"type": "string"}, "-i": {"type": "boolean"}},
         "required": ["pattern"]},
    )
    parsed = model.model_validate({"pattern": "x", "-i": True})
    assert parsed.model_dump(by_alias=True, exclude_none=True) == {"pattern": "x", "-i": True}
    with pytest.raises(ValueError):
        model.model_validate({"pattern": "x", "case": True})


def test_adapter_calls_go_through_the_base_registry(tmp_path: Path) -> None:
    """An emulated call becomes the canonical call on the base registry (where policy sits)."""
    seen: list[tuple[str, object]] = []
    base = builtin_registry()

    class Spy(type(base)):  # type: ignore[misc]
        async def invoke(self, name, raw_args, ctx):  # type: ignore[no-untyped-def]
            seen.append((name, raw_args))
            return await super().invoke(name, raw_args, ctx)

    spy = Spy()
    spy._tools = dict(base._tools)
    spy.copy = lambda: spy  # type: ignore[method-assign]
    registry = adapter_registry(load_table("qwen-code"), spy)
    (tmp_path / "f.txt").write_text("a\nb\nc\n")
    ctx = ToolContext(workspace=tmp_path)
    value = asyncio.run(
        registry.invoke("read_file", {"file_path": str(tmp_path / "f.txt"), "offset": 1,
                                      "limit": 1}, ctx)
    )
    assert value["content"] == "b\n"
    assert seen == [("read_file", {"path": str(tmp_path / "f.txt"), "offset": 2, "limit": 1})]


def test_swe_agent_command_lines_parse_with_quotes_and_newlines() -> None:
    registry = adapter_registry(load_table("swe-agent"), builtin_registry())
    tool = registry.get("str_replace_editor")
    args = parse_command_line(
        tool,  # type: ignore[arg-type]
        "str_replace_editor str_replace src/a.py --old_str 'def f():\n    pass' --new_str 'x'",
    )
    assert args == {"command": "str_replace", "path": "src/a.py",
                    "old_str": "def f():\n    pass", "new_str": "x"}
    view = parse_command_line(tool, "str_replace_editor view a.py --view_range 3 9")  # type: ignore[arg-type]
    assert view["view_range"] == [3, 9]
    with pytest.raises(ArgumentError, match="unknown option --old"):
        parse_command_line(tool, "str_replace_editor str_replace a.py --old x")  # type: ignore[arg-type]


def test_family_defaults_and_unknown_harness() -> None:
    assert default_harness("kimi") == "kimi-code"
    assert default_harness("qwen") == "qwen-code"
    assert default_harness("anthropic") == "claude-code"
    assert default_harness("openai") == "native"
    with pytest.raises(UnknownHarnessError) as info:
        get_harness("claude-cod", "classic")
    assert "did you mean claude-code?" in str(info.value)


def test_text_harness_parses_one_block_and_reminds_otherwise() -> None:
    harness = get_harness("mini-swe-agent", "classic")
    one = harness.actions(AssistantMessage(text="THOUGHT: list.\n```bash\nls -la\n```"))
    assert [c.arguments for c in one.calls] == ["ls -la"]
    two = harness.actions(AssistantMessage(text="```bash\nls\n```\n```bash\npwd\n```"))
    assert two.reminder is not None and "2 fenced blocks" in two.reminder
    none = harness.actions(AssistantMessage(text="I think we are done."))
    assert none.reminder is not None and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in none.reminder
    swe = get_harness("swe-agent", "classic")
    done = swe.actions(AssistantMessage(text="DISCUSSION\nFixed it.\n```\nsubmit\n```"))
    assert done.final_answer == "DISCUSSION\nFixed it."
    wire = swe.actions(AssistantMessage(text="", tool_calls=[ToolCall(id="c", name="x",
                                                                       arguments="{}")]))
    assert wire.reminder is not None
