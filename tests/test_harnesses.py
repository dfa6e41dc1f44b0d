"""`interpreter exec --harness NAME` end to end against the scripted model server: every
harness, both dialects; the model must be offered that harness's own tool names and
argument shapes, and the workspace must end in the right state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_support import call, provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer

SOURCE = "def greet(name):\n    return 'hello ' + name\n"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    w = tmp_path / "work"
    (w / "src").mkdir(parents=True)
    (w / "src" / "app.py").write_text(SOURCE, encoding="utf-8")
    (w / "notes.txt").write_text("TODO: one\n", encoding="utf-8")
    return w


def offered(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Tool name -> parameter schema, whatever the wire."""
    out = {}
    for tool in body.get("tools") or []:
        fn = tool.get("function", tool)
        out[fn["name"]] = fn.get("parameters") or fn.get("input_schema") or {}
    return out


def exec_run(
    script: list[dict[str, Any]], args: list[str], *, home: Path, cwd: Path, wire: str = "chat"
) -> tuple[Any, ScriptedModelServer]:
    with ScriptedModelServer(script) as server:
        run = run_cli(["exec", *provider_flags(server.base_url, wire), *args], home=home, cwd=cwd)
    return run, server


def sent(server: ScriptedModelServer, index: int) -> str:
    return json.dumps(server.requests[index].body, ensure_ascii=False)


def results(server: ScriptedModelServer, index: int) -> list[str]:
    """The tool results (chat wire) in request ``index``, newest last."""
    return [m["content"] for m in server.requests[index].body["messages"] if m["role"] == "tool"]


# --- function-calling harnesses, classic ----------------------------------------------


def test_claude_code_classic(home: Path, work: Path) -> None:
    app = str(work / "src" / "app.py")
    script = [
        {
            "tool_calls": [
                call("Read", {"file_path": app}),
                call("Grep", {"pattern": "TODO", "output_mode": "files_with_matches"}),
                call("Grep", {"pattern": "TODO", "output_mode": "content", "-i": True}),
            ]
        },
        {
            "tool_calls": [
                call(
                    "Edit",
                    {
                        "file_path": app,
                        "old_string": "'hello '",
                        "new_string": "'hi '",
                        "replace_all": False,
                    },
                )
            ]
        },
        {
            "tool_calls": [
                call(
                    "Bash",
                    {"command": "grep -c hi src/app.py", "timeout": 5000, "description": "check"},
                ),
                call(
                    "TodoWrite",
                    {
                        "todos": [
                            {
                                "content": "Edit greeting",
                                "status": "completed",
                                "activeForm": "Editing",
                            }
                        ]
                    },
                ),
            ]
        },
        {"text": "Changed the greeting."},
    ]
    run, server = exec_run(
        script, ["--harness", "claude-code", "say hi"], home=home, cwd=work, wire="anthropic"
    )
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Changed the greeting."
    tools = offered(server.requests[0].body)
    assert list(tools) == ["Bash", "Read", "Write", "Edit", "Glob", "Grep", "TodoWrite"]
    assert set(tools["Edit"]["properties"]) == {
        "file_path",
        "old_string",
        "new_string",
        "replace_all",
    }
    assert "-i" in tools["Grep"]["properties"]
    assert "You are a software engineering agent" in json.dumps(server.requests[0].body["system"])
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("'hello '", "'hi '")
    second = sent(server, 1)
    assert "1\\tdef greet(name):" in second  # Read shows numbered lines
    assert "notes.txt" in second  # Grep in files_with_matches mode
    assert "notes.txt:1: TODO: one" in second  # and in content mode
    assert "exit code: 0" in sent(server, 3)


def test_claude_code_bare_offers_three_tools(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("Edit", {"file_path": "notes.txt", "old_string": "one", "new_string": "two"})
            ]
        },
        {"text": "done"},
    ]
    run, server = exec_run(script, ["--harness", "claude-code-bare", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert list(offered(server.requests[0].body)) == ["Bash", "Read", "Edit"]
    assert (work / "notes.txt").read_text() == "TODO: two\n"


def test_qwen_code_classic(home: Path, work: Path) -> None:
    app = str(work / "src" / "app.py")
    script = [
        {
            "tool_calls": [
                call("read_file", {"file_path": app, "offset": 1, "limit": 1}),
                call("list_directory", {"path": str(work), "ignore": ["*.txt"]}),
                call("grep_search", {"pattern": "greet", "glob": "*.py"}),
            ]
        },
        {
            "tool_calls": [
                call("edit", {"file_path": app, "old_string": "hello", "new_string": "howdy"}),
                call("write_file", {"file_path": str(work / "NEW.md"), "content": "# new\n"}),
                call(
                    "todo_write",
                    {"todos": [{"id": "1", "content": "edit", "status": "in_progress"}]},
                ),
            ]
        },
        {
            "tool_calls": [
                call(
                    "run_shell_command",
                    {"command": "cat NEW.md", "is_background": False, "directory": str(work)},
                )
            ]
        },
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["--harness", "qwen-code", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == [
        "run_shell_command",
        "read_file",
        "write_file",
        "edit",
        "glob",
        "grep_search",
        "list_directory",
        "todo_write",
    ]
    assert tools["read_file"]["required"] == ["file_path"]
    assert set(tools["run_shell_command"]["properties"]) >= {
        "command",
        "is_background",
        "directory",
    }
    read, listing, _ = results(server, 1)
    assert read.startswith("2\t    return 'hello ' + name")  # offset is 0-based
    assert "src/" in listing.splitlines() and "notes.txt" not in listing
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("hello", "howdy")
    assert (work / "NEW.md").read_text() == "# new\n"
    assert "# new" in sent(server, 3)


def test_kimi_cli_classic(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call(
                    "StrReplaceFile",
                    {
                        "path": str(work / "src" / "app.py"),
                        "edit": [
                            {"old": "hello", "new": "hey"},
                            {"old": "name", "new": "who", "replace_all": True},
                        ],
                    },
                ),
                call(
                    "WriteFile", {"path": "notes.txt", "content": "TODO: two\n", "mode": "append"}
                ),
                call("SetTodoList", {"todos": [{"title": "edit", "status": "done"}]}),
            ]
        },
        {
            "tool_calls": [
                call("Shell", {"command": "wc -l < notes.txt", "timeout": 5}),
                call("ReadFile", {"path": "notes.txt", "line_offset": 2, "n_lines": 1}),
            ]
        },
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["--harness", "kimi-cli", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == [
        "Shell",
        "ReadFile",
        "WriteFile",
        "StrReplaceFile",
        "Glob",
        "Grep",
        "SetTodoList",
    ]
    assert set(tools["ReadFile"]["properties"]) == {"path", "line_offset", "n_lines"}
    assert (work / "src" / "app.py").read_text() == ("def greet(who):\n    return 'hey ' + who\n")
    assert (work / "notes.txt").read_text() == "TODO: one\nTODO: two\n"
    assert results(server, 2)[-2:] == ["exit code: 0\n2", "2\tTODO: two"]


def test_kimi_code_is_the_default_for_the_kimi_family(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("Edit", {"path": "notes.txt", "old_string": "one", "new_string": "uno"}),
                call("Read", {"path": "src/app.py", "line_offset": -1}),
                call("TodoList", {"todos": [{"title": "Rename", "status": "in_progress"}]}),
            ]
        },
        {"tool_calls": [call("TodoList", {})]},  # no todos: Kimi Code reads the list back
        {"text": "ok"},
    ]
    run, server = exec_run(
        script, ["-c", "model_providers.scripted.family=kimi", "x"], home=home, cwd=work
    )
    assert run.code == 0, run.stderr
    assert list(offered(server.requests[0].body)) == [
        "Bash",
        "Read",
        "Write",
        "Edit",
        "Grep",
        "Glob",
        "TodoList",
    ]
    assert offered(server.requests[0].body)["TodoList"].get("required") is None
    assert (work / "notes.txt").read_text() == "TODO: uno\n"
    assert results(server, 1)[1].startswith("2\t    return 'hello '")  # negative offset
    assert results(server, 2)[-1] == "Current todo list:\n  [in_progress] Rename"


def test_deepseek_tui_and_minimal_classic(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call("edit_file", {"path": "notes.txt", "search": "O", "replace": "0"}),
                call("grep_files", {"pattern": "GREET", "file_glob": "*.py", "context_lines": 1}),
                call("grep_files", {"pattern": "GREET", "case_sensitive": True}),
                # DeepSeek TUI's exec_shell arguments: cwd runs it there; background is
                # accepted and the command still runs to its end
                call("exec_shell", {"command": "pwd > where.txt", "cwd": "src",
                                    "background": True, "timeout_ms": 5000}),
            ]
        },
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["--harness", "deepseek-tui", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert set(tools["exec_shell"]["properties"]) == {
        "command", "timeout_ms", "cwd", "background", "interactive", "tty", "stdin"
    }
    assert (work / "src" / "where.txt").read_text().strip().endswith("/src")
    assert set(tools["grep_files"]["properties"]) == {
        "pattern", "path", "file_glob", "context_lines", "max_results", "case_sensitive"
    }
    assert (work / "notes.txt").read_text() == "T0D0: one\n"  # every occurrence, as there
    found, exact = results(server, 1)[-3:-1]
    # case-insensitive by default, with a line of context after the match
    assert found == "src/app.py:1: def greet(name):\nsrc/app.py-2-     return 'hello ' + name"
    assert exact.startswith("no matches")

    script = [{"tool_calls": [call("bash", {"command": "echo made > made.txt"})]}, {"text": "ok"}]
    run, server = exec_run(script, ["--harness", "minimal", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert list(offered(server.requests[0].body)) == ["bash", "write_file"]
    assert (work / "made.txt").read_text() == "made\n"


# --- code dialect ----------------------------------------------------------------------

CODE_CASES = {
    "claude-code": (
        "Edit",
        "const r = await tools.Read({file_path: 'src/app.py'});\n"
        "await tools.Edit({file_path: 'src/app.py', old_string: 'hello', new_string: 'hi'});\n"
        "const g = await tools.Grep({pattern: 'TODO'});\n"
        "console.log(r.total_lines, g.matches.length);",
    ),
    "claude-code-bare": (
        "Edit",
        "await tools.Edit({file_path: 'src/app.py', old_string: 'hello', new_string: 'hi'});\n"
        "console.log((await tools.Read({file_path: 'src/app.py'})).total_lines,"
        " (await tools.Bash({command: 'grep -c TODO notes.txt'})).output.trim());",
    ),
    "qwen-code": (
        "run_shell_command",
        "const [f, g] = await Promise.all([tools.read_file({file_path: 'src/app.py'}),\n"
        "  tools.grep_search({pattern: 'TODO'})]);\n"
        "await tools.edit({file_path: 'src/app.py', old_string: 'hello', new_string: 'hi'});\n"
        "console.log(f.total_lines, g.matches.length);",
    ),
    "kimi-code": (
        "Bash",
        "const f = await tools.Read({path: 'src/app.py'});\n"
        "await tools.Edit({path: 'src/app.py', old_string: 'hello', new_string: 'hi'});\n"
        "const g = await tools.Grep({pattern: 'TODO'});\n"
        "console.log(f.total_lines, g.matches.length);",
    ),
    "kimi-cli": (
        "StrReplaceFile",
        "const f = await tools.ReadFile({path: 'src/app.py'});\n"
        "await tools.StrReplaceFile({path: 'src/app.py', edit: {old: 'hello', new: 'hi'}});\n"
        "const g = await tools.Grep({pattern: 'TODO'});\n"
        "console.log(f.total_lines, g.matches.length);",
    ),
    "deepseek-tui": (
        "edit_file",
        "const f = await tools.read_file({path: 'src/app.py'});\n"
        "await tools.edit_file({path: 'src/app.py', search: 'hello', replace: 'hi'});\n"
        "const g = await tools.grep_files({pattern: 'TODO'});\n"
        "console.log(f.total_lines, g.matches.length);",
    ),
    "minimal": (
        "write_file",
        "const r = await tools.bash({command: \"sed -i 's/hello/hi/' src/app.py && wc -l < "
        'src/app.py"});\nconsole.log(r.output.trim(), 1);',
    ),
}


@pytest.mark.parametrize("name", list(CODE_CASES))
def test_code_dialect(name: str, home: Path, work: Path) -> None:
    tool, program = CODE_CASES[name]
    script = [
        {"tool_calls": [call("exec", {"code": f"```js\n{program}\n```"})]},
        {"text": "done"},
    ]
    run, server = exec_run(script, ["--harness", name, "--code-mode", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    tools = offered(server.requests[0].body)
    assert list(tools) == ["exec", "wait"]
    description = server.requests[0].body["tools"][0]["function"]["description"]
    assert f"  {tool}(args: " in description  # the harness's own names, as tools.*
    assert "tools.read_file(" not in description or name in ("qwen-code", "deepseek-tui")
    assert (work / "src" / "app.py").read_text() == SOURCE.replace("hello", "hi")
    assert "2 1" in sent(server, 1)  # the program's output came back


# --- text-parsed harnesses ------------------------------------------------------------


def test_swe_agent_classic(home: Path, work: Path) -> None:
    script = [
        {"text": "DISCUSSION\nLet me see the file.\n```\nstr_replace_editor view src/app.py\n```"},
        {"text": "DISCUSSION\nTwo at once.\n```\nls\n```\n```\npwd\n```"},
        {
            "text": "DISCUSSION\nFix it.\n```\nstr_replace_editor str_replace src/app.py "
            "--old_str \"return 'hello ' + name\" --new_str 'return f\"hello {name}\"'\n```"
        },
        {
            "text": 'DISCUSSION\nCheck.\n```\npython3 -c \'import sys; sys.path.insert(0, "src");'
            ' import app; print(app.greet("bo"))\'\n```'
        },
        {"text": "DISCUSSION\nThe greeting now uses an f-string.\n```\nsubmit\n```"},
    ]
    # `python3 -c CODE` runs code the execpolicy cannot read: it needs approval (issue 16),
    # so this session runs with --approval never (still inside the workspace sandbox)
    args = ["--harness", "swe-agent", "--approval", "never", "fix"]
    run, server = exec_run(script, args, home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert "tools" not in server.requests[0].body or not server.requests[0].body["tools"]
    assert "DISCUSSION" in server.requests[0].body["messages"][0]["content"]
    assert "OBSERVATION:\\n1\\tdef greet(name):" in sent(server, 1)
    assert "Format error: your reply had 2 fenced blocks" in sent(server, 2)
    assert "hello bo" in sent(server, 4)
    assert (work / "src" / "app.py").read_text() == (
        'def greet(name):\n    return f"hello {name}"\n'
    )
    assert run.stdout.strip() == "DISCUSSION\nThe greeting now uses an f-string."


def test_mini_swe_agent_classic_sentinel_ends_the_task(home: Path, work: Path) -> None:
    script = [
        {"text": "THOUGHT: edit.\n```bash\nsed -i 's/one/done/' notes.txt\n```"},
        {
            "text": "THOUGHT: finished.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && "
            "cat notes.txt\n```"
        },
        {"text": "never reached"},
    ]
    run, server = exec_run(script, ["--harness", "mini-swe-agent", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert len(server.requests) == 2
    assert (work / "notes.txt").read_text() == "TODO: done\n"
    assert run.stdout.strip() == "TODO: done"


@pytest.mark.parametrize("name", ["swe-agent", "mini-swe-agent"])
def test_text_harness_code_dialect(name: str, home: Path, work: Path) -> None:
    if name == "swe-agent":
        program = (
            "await tools.str_replace_editor({command: 'str_replace', path: 'notes.txt', "
            "old_str: 'one', new_str: 'two'});\nconsole.log('edited');"
        )
        finish = {"text": "All done.\n```\nsubmit\n```"}
    else:
        program = (
            "await tools.bash({command: \"sed -i 's/one/two/' notes.txt\"});\n"
            "console.log('edited');"
        )
        finish = {
            "text": "```js\nconsole.log('COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT');\n"
            "console.log('All done.');\n```"
        }
    script = [{"text": f"Editing.\n```js\n{program}\n```"}, finish]
    run, server = exec_run(script, ["--harness", name, "--code-mode", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert "declare const tools" in server.requests[0].body["messages"][0]["content"]
    assert "edited" in sent(server, 1)
    assert (work / "notes.txt").read_text() == "TODO: two\n"
    assert run.stdout.strip().endswith("All done.")


# --- tolerant parsing end to end ---------------------------------------------------------


def test_malformed_arguments_are_repaired_or_reported(home: Path, work: Path) -> None:
    script = [
        {
            "tool_calls": [
                call(
                    "Edit",
                    "{'file_path': 'notes.txt', 'old_string': 'one', 'new_string': 'line\nbreak',}",
                ),
                call("Read", '{"file_path": "notes.txt" "limit": 1}'),
                call("bash", {"command": "ls"}),
            ]
        },
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["--harness", "claude-code", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert (work / "notes.txt").read_text() == "TODO: line\nbreak\n"
    second = sent(server, 1)
    assert "the arguments of Read are not valid JSON" in second
    assert "unknown tool 'bash'; did you mean Bash?" in second


def test_tool_call_in_text_is_recovered(home: Path, work: Path) -> None:
    script = [
        {
            "text": "<tool_call>\n<function=write_file>\n<parameter=path>\nout.txt\n</parameter>\n"
            "<parameter=content>\nfrom text\n</parameter>\n</function>\n</tool_call>"
        },
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert (work / "out.txt").read_text() == "from text"
    assert "[result of write_file]" in sent(server, 1)


def test_replies_without_action_or_answer_end_the_turn(home: Path, work: Path) -> None:
    script = [{"text": ""}, {"text": ""}, {"text": ""}, {"text": "never"}]
    run, server = exec_run(script, ["x"], home=home, cwd=work)
    assert run.code == 1
    assert "3 times in a row without a valid action or a final answer" in run.stderr
    assert len(server.requests) == 3
    assert "no tool call and no answer" in sent(server, 1)


def test_harness_cli(home: Path, work: Path) -> None:
    listed = run_cli(["harness", "list"], home=home, cwd=work)
    assert listed.code == 0
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names[0] == "native" and {"claude-code", "qwen-code", "swe-agent"} <= set(names)
    shown = run_cli(["harness", "show", "qwen-code", "--json"], home=home, cwd=work)
    data = json.loads(shown.stdout)
    assert [t["name"] for t in data["tools"]][:2] == ["run_shell_command", "read_file"]
    assert str(work) in data["instructions"]
    code = run_cli(["harness", "show", "claude-code", "--code-mode"], home=home, cwd=work)
    assert "Edit(args: EditArgs): Promise<EditResult>;" in code.stdout
    text = run_cli(["harness", "show", "swe-agent", "--json"], home=home, cwd=work)
    commands = json.loads(text.stdout)["commands"]
    assert [c["name"] for c in commands] == ["bash", "str_replace_editor"]
    assert "old_str" in commands[1]["parameters"]["properties"]
    bad = run_cli(["harness", "show", "claude-cod"], home=home, cwd=work)
    assert bad.code == 2 and "did you mean claude-code?" in bad.stderr


def test_code_mode_programs_are_unwrapped_however_they_come(home: Path, work: Path) -> None:
    """A program as a JSON string, as raw text on a function wire, or in a fence."""
    script = [
        {"tool_calls": [call("exec", json.dumps("console.log('one')"))]},
        {"tool_calls": [call("exec", "console.log('two')")]},
        {"tool_calls": [call("exec", {"code": "```javascript\nconsole.log('three')\n```"})]},
        {"tool_calls": [call("exec", "{not json")]},
        {"text": "ok"},
    ]
    run, server = exec_run(script, ["--code-mode", "x"], home=home, cwd=work)
    assert run.code == 0, run.stderr
    assert results(server, 1)[-1].startswith("one")
    assert results(server, 2)[-1].startswith("two")
    assert results(server, 3)[-1].startswith("three")
    assert "the arguments of exec are not valid JSON" in results(server, 4)[-1]


def test_resume_keeps_the_recorded_harness_and_dialect(home: Path, work: Path) -> None:
    script = [{"text": "first"}, {"text": "second"}]
    with ScriptedModelServer(script) as server:
        flags = provider_flags(server.base_url, "chat")
        first = run_cli(
            ["exec", *flags, "--harness", "kimi-cli", "--code-mode", "one"], home=home, cwd=work
        )
        again = run_cli(["resume", *flags, "--last", "two"], home=home, cwd=work)
    assert first.code == 0 and again.code == 0, again.stderr
    assert list(offered(server.requests[1].body)) == ["exec", "wait"]
    description = server.requests[1].body["tools"][0]["function"]["description"]
    assert "StrReplaceFile(args: StrReplaceFileArgs)" in description


def test_qwen_code_mode_feels_like_qwen_codes_own(home: Path, work: Path) -> None:
    """text() emits output and results carry `output`, as in Qwen Code's code mode."""
    program = (
        "const results = await Promise.allSettled([\n"
        "  tools.read_file({file_path: 'src/app.py'}),\n"
        "  tools.grep_search({pattern: 'TODO'}),\n"
        "  tools.read_file({file_path: 'missing.py'})]);\n"
        "for (const r of results) text(r.status === 'fulfilled' ? r.value.output"
        " : String(r.reason));"
    )
    script = [{"tool_calls": [call("exec", {"code": program})]}, {"text": "ok"}]
    run, server = exec_run(
        script, ["--harness", "qwen-code", "--code-mode", "x"], home=home, cwd=work
    )
    assert run.code == 0, run.stderr
    description = server.requests[0].body["tools"][0]["function"]["description"]
    assert "text(value)" in description
    assert "output: string;" in description.split("interface ReadFileResult")[1].split("}")[0]
    out = results(server, 1)[0]
    assert out.startswith("1\tdef greet(name):\n2\t    return 'hello ' + name\n")
    assert "notes.txt:1: TODO: one" in out
    assert "missing.py" in out.splitlines()[3]
