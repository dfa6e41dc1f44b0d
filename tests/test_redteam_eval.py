"""`interpreter eval` attacked by the model it measures: what the model writes in a
task's workspace is read, and run, by the task's check, and the workspace is removed
afterwards by codemode's own process. The real CLI, real sessions, sandbox and isolate;
the scripted model server plays a hostile model."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from agent_support import provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer

FIX = ("await tools.Edit({file_path: 'shop/pricing.py', old_string: 'percent / 10)', "
       "new_string: 'percent / 100)'});\n")


def _model(program: str) -> Any:
    """A model that answers find_the_bug with one program, then a final message."""

    def reply(request: Any) -> dict[str, Any]:
        messages = request.body.get("messages") or []
        if any(m.get("role") == "tool" for m in messages):
            return {"text": "fixed"}
        return {"tool_calls": [{"name": "exec", "arguments": {"code": program}}]}

    return reply


def _eval(home: Path, work: Path, program: str) -> tuple[Any, dict[str, Any]]:
    report = work / "report.json"
    with ScriptedModelServer(_model(program)) as server:
        run = run_cli(["eval", *provider_flags(server.base_url, "chat"), "--task",
                       "find_the_bug", "--harness", "claude-code", "--dialect", "code",
                       "--repeats", "1", "--report", str(report)],
                      home=home, cwd=work, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    return run, json.loads(report.read_text("utf-8"))


def test_the_check_runs_the_models_test_file_confined(home: Path, work: Path) -> None:
    """find_the_bug's check runs ``tests/test_cart.py``, which the model may rewrite:
    its code must run no more freely than the model's own commands (here: it writes
    into codemode's home, which no command may)."""
    pwned = home / "pwned"
    payload = f"open({str(pwned)!r}, 'w').write('x')\n"
    program = FIX + (f"await tools.Write({{file_path: 'tests/test_cart.py', "
                     f"content: {json.dumps(payload)}}});\n")
    run, report = _eval(home, work, program)
    assert run.code == 0, run.stderr
    assert not pwned.exists(), "the task's check ran the model's code outside the sandbox"
    [record] = report["runs"]
    assert record["ok"] is False and record["error_kind"] == "wrong_result", record
    assert "the check" in record["error"] or "Error" in record["error"], record


def test_a_correct_fix_still_passes_its_confined_check(home: Path, work: Path) -> None:
    run, report = _eval(home, work, FIX)
    assert run.code == 0, run.stderr
    [record] = report["runs"]
    assert record["ok"] is True, record


def test_a_workspace_the_model_made_deep_and_read_only_is_removed(
    home: Path, work: Path
) -> None:
    """A tree deeper than Python 3.11's rmtree recurses, and folders made 0555 with
    files in them: the run is counted, nothing crashes, and no copy is left."""
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob("codemode-eval-find_the_bug-*"))
    shape = ("import os\n"
             "here = os.getcwd()\n"
             "for _ in range(1500):\n"
             "    os.mkdir('d')\n"
             "    os.chdir('d')\n"
             "os.chdir(here)\n"
             "os.makedirs('locked/inner', exist_ok=True)\n"
             "open('locked/inner/f', 'w').write('x')\n"
             "os.chmod('locked/inner', 0o555)\n"
             "os.chmod('locked', 0o555)\n")
    # (the fix only once the shape is made: a run that passes made it)
    program = ("await tools.Write({file_path: 'shape.py', "
               f"content: {json.dumps(shape)}}});\n"
               "const r = await tools.Bash({command: 'python3 shape.py'});\n"
               "if (r.exit_code !== 0) throw new Error(r.output);\n") + FIX
    run, report = _eval(home, work, program)
    assert run.code == 0, run.stderr
    [record] = report["runs"]
    assert record["ok"] is True, record
    assert set(temp.glob("codemode-eval-find_the_bug-*")) <= before, "a run's copy was left"
