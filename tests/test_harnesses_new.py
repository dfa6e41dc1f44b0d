"""The harnesses of opencode, pi, zcode, little-coder and Terminus 2, end to end through
`interpreter exec` against the scripted model server in both dialects: each offers its
own tool names and argument shapes, a scripted call round-trips to the workspace and
back, and Terminus's JSON replies (parse errors re-prompted, completion confirmed) drive
a terminal built on our shell tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import call, provider_flags, run_cli

from codemode.harnesses.terminus import parse_reply
from codemode_testkit.scripted_server import ScriptedModelServer

SOURCE = "def greet(name):\n    return 'hello ' + name\n"
NEW = ["opencode", "pi", "zcode", "little-coder", "terminus-2"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    (w / "src").mkdir(parents=True)
    (w / "src" / "app.py").write_text(SOURCE, encoding="utf-8")
    (w / "notes.txt").write_text("TODO: one\n", encoding="utf-8")
    return w


def exec_run(
    script: list[dict[str, Any]], args: list[str], *, home: Path, cwd: Path, wire: str = "chat"
) -> tuple[Any, ScriptedModelServer]:
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, wire), *args], home=home, cwd=cwd)
    return run, server


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function", tool)
        out[fn["name"]] = fn.get("parameters") or fn.get("input_schema") or {}
    return out


def sent(server: ScriptedModelServer, index: int) -> str:
    return json.dumps(server.requests[index].body, ensure_ascii=False)


def tool_results(server: ScriptedModelServer, index: int) -> list[str]:
    """Tool results in request ``index``, on the chat wire or the Messages wire."""
    out = []
    for m in server.requests[index].body["messages"]:
        if m.get("role") == "tool":
            out.append(m["content"])
        elif isinstance(m.get("content"), list):
            for block in m["content"]:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    out.append(content if isinstance(content, str) else content[0]["text"])
    return out


def last_user_text(server: ScriptedModelServer, index: int) -> str:
    message = server.requests[index].body["messages"][-1]
    assert message["role"] == "user"
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


# --- every new harness renders in both dialects -----------------------------------------


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("code", [False, True])
def test_new_harnesses_render(name: str, code: bool, home: Path, work: Path) -> None:
    args = ["harness", "show", name, "--json", *(["--code-mode"] if code else [])]
    done = run_cli(args, home=home, cwd=work)
    assert done.code == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["dialect"] == ("code" if code else "classic")
    text = shown["instructions"]
    assert "{{" not in text and str(work) in text
    if name == "terminus-2":
        assert shown["tools"] == [] and [c["name"] for c in shown["commands"]] == ["send_keys"]
        assert ('"program"' if code else '"keystrokes"') in text
        if code:
            assert "send_keys(args: SendKeysArgs): Promise<SendKeysResult>;" in text
    elif code:
        assert [t["name"] for t in shown["tools"]] == ["exec", "wait"]
        assert "declare const tools" in shown["typescript"]
    else:
        assert shown["tools"] and all(t["description"] for t in shown["tools"])
    if name == "zcode":
        assert shown["wire"] == "messages"
    listed = run_cli(["harness", "list"], home=home, cwd=work)
    assert name in listed.stdout


# --- classic round trips -------------------------------------------------------------------


def test_opencode_classic(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("read", {"filePath": "src/app.py", "offset": 2, "limit": 1}),
                call("edit", {"filePath": "src/app.py", "oldString": "hello",
                              "newString": "hi"}),
                call("list", {"path": "src"}),
                call("grep", {"pattern": "greet", "include": "*.py"}),
                call("todowrite", {"todos": [{"content": "Rename", "status": "in_progress",
                                              "priority": "high", "id": "1"}]}),
            ]
        },
        {"tool_calls": [call("bash", {"command": "grep -c hi app.py", "workdir": "src",
                                      "description": "Count the new greeting"})]},
        {"text": "Renamed."},
    ]
    run, server = exec_run(script, ["--harness", "opencode", "--json", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == ["bash", "read", "write", "edit", "glob", "grep", "list", "todowrite"]
    assert set(tools["edit"]["properties"]) == {"filePath", "oldString", "newString", "replaceAll"}
    read, edit, listing, grep, todo = tool_results(server, 1)
    assert todo.startswith("plan updated: 0/1 done")
    assert read == "2\t    return 'hello ' + name"
    assert edit.startswith("Edited src/app.py (1 replacement")
    assert listing == "app.py"
    assert grep == "src/app.py:1: def greet(name):"
    assert tool_results(server, 2)[-1] == "exit code: 0\n1"
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("hello", "hi")
    items = [e["item"] for e in run.events() if e["type"] == "item.completed"]
    assert {i["type"] for i in items} >= {"command_execution", "todo_list"}


def test_pi_classic_with_several_edits(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("edit", {"path": "src/app.py", "edits": [
                    {"oldText": "hello", "newText": "hey"},
                    {"oldText": "+ name", "newText": "+ name.upper()"},
                ]}),
                call("bash", {"command": "echo $((6 * 7))", "timeout": 5}),
                call("edit", {"path": "src/app.py", "oldText": "missing", "newText": "x"}),
            ]
        },
        {"tool_calls": [call("read", {"path": "src/app.py", "offset": 2})]},
        {"text": "done"},
    ]
    run, server = exec_run(script, ["--harness", "pi", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == ["read", "bash", "edit", "write"]
    assert set(tools["edit"]["properties"]) == {"path", "oldText", "newText", "edits"}
    edited, shell, failed = tool_results(server, 1)
    read = tool_results(server, 2)[-1]
    assert edited.startswith("Edited src/app.py (2 replacement")
    assert shell == "exit code: 0\n42"
    assert read == "2\t    return 'hey ' + name.upper()"
    assert failed == "edit: oldText was not found in src/app.py; read the file first"


def test_zcode_classic_on_the_messages_wire_with_grep_context(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("Grep", {"pattern": "return", "output_mode": "content", "-B": 1}),
                call("Grep", {"pattern": r"greet\(name\):\n\s+return", "multiline": True,
                              "output_mode": "content"}),
                call("Grep", {"pattern": r"name\):\n", "output_mode": "content"}),
                call("Edit", {"file_path": "src/app.py", "old_string": "hello",
                              "new_string": "hi"}),
            ]
        },
        {"text": "ok"},
    ]
    run, server = exec_run(
        script, ["--harness", "zcode", "x"], home=home, cwd=work, wire="anthropic"
    )
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == ["Bash", "Read", "Write", "Edit", "Glob", "Grep", "TodoWrite"]
    assert {"-A", "-B", "-C", "multiline"} <= set(tools["Grep"]["properties"])
    context, multiline, single_line, edit = tool_results(server, 1)
    assert context == "src/app.py-1- def greet(name):\nsrc/app.py:2:     return 'hello ' + name"
    assert multiline == "src/app.py:1: def greet(name):"
    assert single_line.startswith("no matches")  # without multiline, lines are separate
    assert edit.startswith("Edited src/app.py")


def test_zcode_is_the_default_for_glm_models(home: Path, work: Path) -> None:
    script = [{"text": "hi"}]
    run, server = exec_run(
        script, ["-c", "model_providers.scripted.family=glm", "x"], home=home, cwd=work,
        wire="anthropic",
    )
    assert run.code == 0, run.stderr
    assert "TodoWrite" in offered(server.requests[0].body)


def test_little_coder_classic_is_compact(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("find", {"pattern": "TODO"}),
                call("edit", {"path": "notes.txt", "find": "one", "replace": "two"}),
            ]
        },
        {
            "tool_calls": [
                call("read", {"path": "notes.txt", "start": 1, "lines": 1}),
                call("run", {"command": "cat notes.txt"}),
            ]
        },
        {"text": "done"},
    ]
    run, server = exec_run(script, ["--harness", "little-coder", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    body = server.requests[0].body
    assert list(offered(body)) == ["run", "read", "write", "edit", "find"]
    # small enough for a small model: the prompt and schemas together stay short
    assert len(body["messages"][0]["content"]) < 900
    assert len(json.dumps(body["tools"])) < 2000
    found, edited = tool_results(server, 1)
    read, ran = tool_results(server, 2)[-2:]
    assert edited.startswith("Edited notes.txt")
    assert found == "notes.txt:1: TODO: one"
    assert read == "1\tTODO: two"
    assert ran == "exit code: 0\nTODO: two"


# --- code dialect round trips ----------------------------------------------------------------

CODE_CASES = {
    "opencode": (
        "const f = await tools.read({filePath: 'src/app.py'});\n"
        "await tools.edit({filePath: 'src/app.py', oldString: 'hello', newString: 'hi'});\n"
        "const g = await tools.grep({pattern: 'TODO'});\n"
        "console.log(f.total_lines, g.matches.length);"
    ),
    "pi": (
        "const f = await tools.read({path: 'src/app.py'});\n"
        "await tools.edit({path: 'src/app.py', oldText: 'hello', newText: 'hi'});\n"
        "const r = await tools.bash({command: 'grep -c TODO notes.txt'});\n"
        "console.log(f.total_lines, r.output.trim());"
    ),
    "zcode": (
        "const [f, g] = await Promise.all([tools.Read({file_path: 'src/app.py'}),\n"
        "  tools.Grep({pattern: 'TODO', output_mode: 'content', '-C': 1})]);\n"
        "await tools.Edit({file_path: 'src/app.py', old_string: 'hello', new_string: 'hi'});\n"
        "console.log(f.total_lines, g.matches.length);"
    ),
    "little-coder": (
        "const f = await tools.read({path: 'src/app.py'});\n"
        "await tools.edit({path: 'src/app.py', find: 'hello', replace: 'hi'});\n"
        "const g = await tools.find({pattern: 'TODO'});\n"
        "console.log(f.total_lines, g.matches.length);"
    ),
}


@pytest.mark.parametrize("name", list(CODE_CASES))
def test_new_harnesses_code_dialect(name: str, home: Path, work: Path) -> None:
    script = [{"tool_calls": [call("exec", {"code": CODE_CASES[name]})]}, {"text": "done"}]
    wire = "anthropic" if name == "zcode" else "chat"
    run, server = exec_run(
        script, ["--harness", name, "--code-mode", "x"], home=home, cwd=work, wire=wire
    )
    assert run.code == 0, run.stderr
    assert list(offered(server.requests[0].body)) == ["exec", "wait"]
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("hello", "hi")
    assert "2 1" in tool_results(server, 1)[-1]


# --- Terminus 2 ----------------------------------------------------------------------------


def reply(commands: list[dict[str, Any]], *, done: bool = False, **extra: Any) -> dict[str, str]:
    body = {"analysis": "Looking.", "plan": "Next step.", "commands": commands,
            "task_complete": done, **extra}
    return {"text": json.dumps(body)}


def test_terminus_classic_keystrokes_reprompts_and_confirmed_completion(
    home: Path, work: Path
) -> None:
    script = [
        {"text": "I will list the files first."},
        {"text": '{"analysis": "x", "plan": "y", "commands": [{"keystrokes": "ls\\n",}],}'},
        {"text": json.dumps({"analysis": "x", "commands": [{"keystrokes": 5}]})},
        {"text": "Here is my reply:\n```json\n" + json.dumps({
            "analysis": "Start.", "plan": "Go to src and edit.",
            "commands": [{"keystrokes": "cd src\n", "duration": 0.1},
                         {"keystrokes": "sed -i 's/hello/hi/' app.py\n", "duration": 0.2},
                         {"keystrokes": "cat app.py", "duration": 0.1}],
            "task_complete": False}) + "\n```"},
        reply([{"keystrokes": "\n", "duration": 0.1},
               {"keystrokes": "cd ..\n"}, {"keystrokes": "pwd\n"}]),
        reply([], done=True),
        {"text": json.dumps({"analysis": "The greeting is renamed.", "plan": "",
                             "commands": [], "task_complete": True})},
        {"text": "never reached"},
    ]
    run, server = exec_run(
        script, ["--harness", "terminus-2", "--json", "rename"], home=home, cwd=work
    )
    assert run.code == 0, run.stderr
    assert not server.requests[0].body.get("tools")
    assert '"keystrokes"' in server.requests[0].body["messages"][0]["content"]
    # 0: no JSON at all: re-prompted
    none = last_user_text(server, 1)
    assert none.startswith("Your previous reply could not be used:\n- no JSON object found")
    # 1: malformed JSON is repaired (trailing commas), with a warning
    first = last_user_text(server, 2)
    assert "Warning: the JSON was malformed and has been repaired" in first
    assert "New terminal output:" in first and "$ ls" in first and "notes.txt" in first
    # 2: a reply that cannot be used is re-prompted with each problem named
    second = last_user_text(server, 3)
    assert second.startswith("Your previous reply could not be used:")
    assert '- "plan" is missing or not a string' in second
    assert "- commands[0].keystrokes is missing or not a string" in second
    # 3: text around the object is ignored with a warning; cd is remembered; a line
    #    typed without Enter waits at the prompt
    third = last_user_text(server, 4)
    assert "Warning: text before the JSON object was ignored." in third
    assert f"{work / 'src'}$ sed -i" in third
    assert third.rstrip().endswith(f"{work / 'src'}$ cat app.py")
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("hello", "hi")
    # 4: Enter runs the waiting line
    fourth = last_user_text(server, 5)
    assert "return 'hi ' + name" in fourth
    assert f"\n{work}\n" in fourth
    # 5: the first task_complete is asked back, the second ends the turn
    assert "You marked the task complete" in last_user_text(server, 6)
    assert len(server.requests) == 7
    assert run.events()[-1]["type"] == "turn.completed"
    messages = [e["item"]["text"] for e in run.events()
                if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"]
    assert messages[-1] == "The greeting is renamed."
    calls = [e["item"] for e in run.events()
             if e["type"] == "item.completed" and e["item"]["type"] == "tool_call"]
    assert {c["name"] for c in calls} == {"send_keys"}


def test_terminus_refused_command_shows_on_the_screen(home: Path, work: Path) -> None:
    script = [
        reply([{"keystrokes": "touch made.txt\n", "duration": 0.1}]),
        reply([], done=True),
        reply([], done=True),
    ]
    run, server = exec_run(
        script, ["--harness", "terminus-2", "--sandbox", "read-only", "x"], home=home, cwd=work
    )
    assert run.code == 0, run.stderr
    screen = last_user_text(server, 1)
    assert "$ touch made.txt" in screen
    assert not (work / "made.txt").exists()


def test_terminus_code_dialect(home: Path, work: Path) -> None:
    program = (
        "const a = await tools.send_keys({keystrokes: 'cd src\\n', duration: 0.1});\n"
        "const b = await tools.send_keys({keystrokes: \"grep -c hello app.py\\n\"});\n"
        "console.log(b.cwd.endsWith('src'), b.commands[0].exit_code, b.screen.split('\\n')[1]);"
    )
    script = [
        {"text": json.dumps({"analysis": "a", "plan": "b", "program": program})},
        {"text": json.dumps({"analysis": "a", "plan": "b", "commands": []})},
        {"text": json.dumps({"analysis": "Counted.", "plan": "", "program": "",
                             "task_complete": True})},
        {"text": json.dumps({"analysis": "Counted.", "plan": "", "program": "",
                             "task_complete": True})},
    ]
    run, server = exec_run(
        script, ["--harness", "terminus-2", "--code-mode", "x"], home=home, cwd=work
    )
    assert run.code == 0, run.stderr
    assert "declare const tools" in server.requests[0].body["messages"][0]["content"]
    assert "true 0 1" in last_user_text(server, 1)
    assert '"program" is missing' in last_user_text(server, 2)
    assert run.stdout.strip() == "Counted."


def test_terminus_reply_parsing() -> None:
    ok, problems, warnings = parse_reply(
        '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls\\n", "duration": 99,'
        ' "extra": 1}], "task_complete": "false", "mood": "good"}', code=False
    )
    assert problems == [] and ok is not None
    assert ok.commands == [{"keystrokes": "ls\n", "duration": 60.0}]
    assert ok.task_complete is False
    assert set(warnings) == {
        "task_complete should be true or false, not a string",
        "unknown fields ignored: mood",
        "commands[0].duration was clamped to 0-60 seconds",
        "commands[0]: unknown fields ignored: extra",
    }
    for text, problem in [
        ("no json here", "no JSON object found in the reply"),
        ('["a"]', "no JSON object found in the reply"),
        ('{"analysis": "a", "plan": "p", "commands": "ls"}', '"commands" must be a list'),
        ('{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "x", "duration": true}]}',
         "commands[0].duration must be a number of seconds"),
        ('{"analysis": "a", "plan": "p", "commands": [], "task_complete": 3}',
         "task_complete must be true or false"),
        ('{"analysis": "a", "plan": "p"}', '"commands" is missing'),
        ('{"analysis": "a", "plan": "p", "commands": [' + '{"keystrokes": "x"},' * 51 + "]}",
         "at most 50 commands per reply"),
    ]:
        parsed, found, _ = parse_reply(text, code=False)
        assert parsed is None and problem in found, (text, found)
    done, problems, _ = parse_reply('{"analysis": "a", "plan": "p", "task_complete": true}',
                                    code=True)
    assert done is not None and done.task_complete and problems == []


def test_terminal_keys_limits_and_screen(tmp_path: Path) -> None:
    import asyncio

    from codemode.harnesses.adapters import adapter_registry
    from codemode.harnesses.spec import load_table
    from codemode.tools.builtin import builtin_registry
    from codemode.tools.context import ToolContext, ToolError

    registry = adapter_registry(load_table("terminus-2"), builtin_registry())
    ctx = ToolContext(workspace=tmp_path)

    async def keys(text: str, **more: Any) -> Any:
        return await registry.invoke("send_keys", {"keystrokes": text, **more}, ctx)

    async def session() -> list[Any]:
        out = [await keys("echo half")]          # typed, not entered
        out.append(await keys("Up"))              # a key with no effect here
        out.append(await keys("C-c"))             # clears the waiting line
        out.append(await keys("seq 1 100\n", duration=0.2))
        out.append(await keys("python3 -c \"print('y' * 5000)\"\n"))
        out.append(await keys("mkdir -p d/e && cd d/e\ncd d/e\n"))
        out.append(await keys("cd\n"))
        try:
            await keys("x" * 100_001)
        except ToolError as exc:
            out.append(str(exc))
        return out

    half, up, cleared, many, wide, into, back, refused = asyncio.run(session())
    assert half["screen"].endswith("$ echo half") and half["commands"] == []
    assert up["screen"] == half["screen"]
    assert cleared["screen"].splitlines()[0].endswith("$ echo half^C")
    assert cleared["screen"].splitlines()[-1].endswith("$ ")
    lines = many["screen"].splitlines()
    assert len(lines) == 61 and lines[0] == "[42 earlier lines scrolled off]"
    assert lines[-2] == "100" and many["commands"] == [{"command": "seq 1 100", "exit_code": 0}]
    assert wide["screen"].splitlines()[1] == "y" * 2000 + " [...line cut]"
    # `cd` is remembered (one chained with && stays in that line's own shell), and a
    # bare `cd` returns to where the terminal started
    assert into["cwd"] == f"{tmp_path}/d/e" and into["screen"].endswith(f"{tmp_path}/d/e$ ")
    assert back["cwd"] == str(tmp_path)
    assert refused == "send_keys: at most 100000 keystrokes at a time"
