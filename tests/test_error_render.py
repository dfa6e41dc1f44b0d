"""A program's error as Node prints an uncaught one — position, the source line with a
caret, the stack in the program's own lines — and the same text for the person at the
terminal and for the model (it used to be `TypeError at 2:13: deep`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import call, provider_flags, run_cli

from codemode.js_runtime.error_render import render_error
from codemode.js_runtime.models import ExecError
from codemode_testkit.scripted_server import ScriptedModelServer

PROGRAM = "function deep(o) {\n  return o.inner.value;\n}\nconst r = deep({});\nreturn r;\n"


def test_tabs_keep_the_caret_under_the_column_and_long_lines_are_cut() -> None:
    error = ExecError(kind="runtime", name="TypeError", message="x", line=1, column=3,
                      stack="TypeError: x\n    at program.js:1:3")
    assert render_error(error, "\t\tbad()").splitlines()[:3] == [
        "program.js:1:3", "\t\tbad()", "\t\t^"
    ]
    long = "a" * 500 + "BAD" + "b" * 500
    error = ExecError(kind="runtime", name="Error", message="m", line=1, column=501)
    where, shown, caret, *_ = render_error(error, long, "s.js").splitlines()
    assert where == "s.js:1:501" and len(shown) < 200
    assert shown[caret.index("^"): caret.index("^") + 3] == "BAD"
    limit = ExecError(kind="limit", name="TimeoutError", message="ran past 1 s", limit="timeout")
    assert render_error(limit, "while(1){}") == "TimeoutError: ran past 1 s"


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
def test_the_model_and_the_terminal_get_the_same_rendering(
    engine: str, home: Path, work: Path
) -> None:
    script = [{"tool_calls": [call("exec", {"code": PROGRAM})]}, {"text": "saw it"}]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "--code-mode",
             "-c", f"engine={engine}", "go"],
            home=home, cwd=work,
        )
        assert run.code == 0, run.stderr
        sent = json.dumps(server.requests[1].body, ensure_ascii=False)
    [result] = [m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    error = result[result.index("[error]\n") + len("[error]\n"):].rsplit("\n[", 1)[0]
    lines = error.splitlines()
    assert lines[0].startswith("program.js:2:"), error
    assert lines[1] == "  return o.inner.value;"
    column = int(lines[0].rsplit(":", 1)[1])
    assert lines[2] == " " * (column - 1) + "^"
    assert lines[3] == "" and lines[4].startswith("TypeError: ")
    assert lines[5].startswith("    at deep (program.js:2:")
    assert lines[6].startswith("    at program.js:4:")
    assert "prelude" not in sent and "__cm" not in error
    # The terminal (exec's progress on stderr) shows the same text.
    at = 0
    for line in filter(str.strip, lines):  # every line, in order (indented under the call)
        at = run.stderr.find(line.strip(), at)
        assert at >= 0, (line, run.stderr)
