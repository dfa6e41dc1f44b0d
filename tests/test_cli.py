"""The `interpreter` console script, driven for real through subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

INTERPRETER = Path(sys.executable).parent / "interpreter"
ENGINES = ["quickjs", "v8"]


def interp(
    *args: str | Path, cwd: Path, input: str | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INTERPRETER), *map(str, args)],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def script(tmp_path: Path, source: str, name: str = "prog.js") -> Path:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return path


def stderr_lines(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return proc.stderr.splitlines()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param


def test_console_script_exists() -> None:
    assert INTERPRETER.exists(), f"console script not installed at {INTERPRETER}"


# --- run: output, argv, stdin, cwd -----------------------------------------------------


def test_run_prints_logs_and_value(tmp_path: Path) -> None:
    prog = script(tmp_path, 'console.log("hello there");\nreturn {answer: 42};\n')
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "hello there"
    assert json.loads(proc.stdout.split("\n", 1)[1]) == {"answer": 42}
    assert proc.stderr == ""


def test_run_string_value_printed_raw(tmp_path: Path) -> None:
    prog = script(tmp_path, 'return "plain text";\n')
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "plain text\n"


def test_run_reads_script_from_stdin(tmp_path: Path) -> None:
    proc = interp("run", "-", cwd=tmp_path, input='console.log("from stdin");\nreturn 7;\n')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["from stdin", "7"]


@pytest.mark.parametrize("engine", ENGINES)
def test_run_ends_cleanly_with_calls_left_unawaited(tmp_path: Path, engine: str) -> None:
    # The program ends while its calls are still running (one about to fail, one slow):
    # they are cancelled, and nothing about them reaches stderr.
    prog = script(
        tmp_path,
        'tools.read_file({path: "missing.txt"});\n'
        'tools.shell({command: "sleep 5"});\n'
        'tools.glob({pattern: "**/*"});\n'
        'console.log("done");\n',
    )
    proc = interp("run", prog, "--engine", engine, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"
    assert proc.stderr == ""


def test_run_refuses_a_script_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin1.js").write_bytes('console.log("caf\u00e9")'.encode("latin-1"))
    for args, stdin, name in (
        (["latin1.js"], None, "latin1.js"),
        (["-"], (tmp_path / "latin1.js").read_bytes(), "stdin"),
        (["latin1.js", "--repos", str(tmp_path)], None, "latin1.js"),
    ):
        proc = subprocess.run(
            [str(INTERPRETER), "run", *args], cwd=tmp_path, input=stdin, capture_output=True,
            timeout=30,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.decode().splitlines() == [
            f"interpreter run: error: {name} is not UTF-8 text (byte 0xe9 at offset 16)"
        ]


def test_run_warn_and_error_go_to_stderr(tmp_path: Path) -> None:
    prog = script(tmp_path, 'console.log("out");\nconsole.error("err");\nconsole.warn("warn");\n')
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["out"]
    assert stderr_lines(proc) == ["err", "warn"]


def test_run_streams_console_output(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        'console.log("first");\nawait tools.shell({command: "sleep 1"});\nconsole.log("second");\n',
    )
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(INTERPRETER), "run", str(prog)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        arrivals = []
        for line in proc.stdout:
            arrivals.append((time.monotonic(), line.rstrip("\n")))
        proc.wait(timeout=30)
        end = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert [text for _, text in arrivals] == ["first", "second"]
    first_at = arrivals[0][0]
    assert end - first_at >= 0.5, (
        f"'first' arrived {first_at - start:.2f}s after start, process ended at "
        f"{end - start:.2f}s: output was buffered, not streamed"
    )
    assert arrivals[1][0] - first_at >= 0.5


def test_run_args_reach_script_as_argv(tmp_path: Path) -> None:
    prog = script(tmp_path, "return argv;\n")
    proc = interp("run", prog, "one", "two words", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["one", "two words", "3"]


def test_run_dash_args_after_double_dash_reach_argv(tmp_path: Path) -> None:
    prog = script(tmp_path, "return argv;\n")
    proc = interp("run", prog, "x", "--", "--flag", "-v", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["x", "--flag", "-v"]


def test_run_without_args_gives_empty_argv(tmp_path: Path) -> None:
    prog = script(tmp_path, "return {n: argv.length, isArray: Array.isArray(argv)};\n")
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"n": 0, "isArray": True}


def test_run_cwd_sets_workspace(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prog = script(
        tmp_path,
        'await tools.write_file({path: "made.txt", content: "made here"});\n'
        'const r = await tools.shell({command: "pwd"});\n'
        "return r.output.trim();\n",
    )
    proc = interp("run", "--cwd", work, prog, cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert (work / "made.txt").read_text() == "made here"
    assert not (elsewhere / "made.txt").exists()
    assert Path(proc.stdout.strip()).resolve() == work.resolve()


def test_run_default_cwd_is_current_directory(tmp_path: Path) -> None:
    prog = script(tmp_path, 'await tools.write_file({path: "here.txt", content: "x"});\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    proc = interp("run", prog, cwd=sub)
    assert proc.returncode == 0, proc.stderr
    assert (sub / "here.txt").exists()


# --- run: script errors ----------------------------------------------------------------


def test_run_syntax_error_exit_1_shown_as_node_shows_it(tmp_path: Path, engine: str) -> None:
    prog = script(tmp_path, "const x = 1;\nconst y = ;\n")
    proc = interp("run", "--engine", engine, prog, cwd=tmp_path)
    assert proc.returncode == 1
    where, line, caret, blank, error, *_ = stderr_lines(proc)
    assert re.fullmatch(rf"{re.escape(str(prog))}:2:(\d+)", where), proc.stderr
    assert line == "const y = ;" and caret.strip() == "^" and blank == ""
    assert error.startswith("SyntaxError: ")
    assert proc.stdout == ""


def test_run_runtime_error_exit_1_with_source_line_caret_and_stack(
    tmp_path: Path, engine: str
) -> None:
    prog = script(tmp_path, 'const x = 1;\n\n  throw new Error("boom");\n')
    proc = interp("run", "--engine", engine, prog, cwd=tmp_path)
    assert proc.returncode == 1
    name = re.escape(str(prog))
    match = re.fullmatch(
        rf'{name}:3:(\d+)\n  throw new Error\("boom"\);\n( *)\^\n\nError: boom\n'
        rf"    at {name}:3:(\d+)\n",
        proc.stderr,
    )
    assert match, proc.stderr
    column = int(match[1])
    assert len(match[2]) == column - 1 and match[3] == match[1]
    assert 3 <= column <= 13  # at `throw`, `new` or `Error`, by engine


def test_run_output_before_error_is_kept(tmp_path: Path) -> None:
    prog = script(tmp_path, 'console.log("before");\nthrow new TypeError("bad");\n')
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == "before\n"
    assert proc.stderr.startswith(f"{prog}:2:") and "\nTypeError: bad\n" in proc.stderr


def test_run_failing_tool_call_uncaught_is_script_error(tmp_path: Path) -> None:
    prog = script(tmp_path, 'await tools.read_file({path: "does-not-exist.txt"});\n')
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 1
    assert "\nToolError: read_file: no such file: does-not-exist.txt" in proc.stderr


def test_run_failure_halfway_keeps_completed_tool_calls(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        'await tools.write_file({path: "a.txt", content: "A"});\n'
        'throw new Error("halfway");\n'
        'await tools.write_file({path: "b.txt", content: "B"});\n',
    )
    proc = interp("run", prog, cwd=tmp_path)
    assert proc.returncode == 1
    assert "halfway" in proc.stderr
    assert (tmp_path / "a.txt").read_text() == "A"
    assert not (tmp_path / "b.txt").exists()


# --- run: limits -----------------------------------------------------------------------


def test_run_timeout_limit_exit_3(tmp_path: Path, engine: str) -> None:
    prog = script(tmp_path, "while (true) {}\n")
    start = time.monotonic()
    proc = interp("run", "--engine", engine, "--timeout", "0.5", prog, cwd=tmp_path, timeout=20)
    elapsed = time.monotonic() - start
    assert proc.returncode == 3, proc.stderr
    assert elapsed < 5, f"took {elapsed:.1f}s to stop a 0.5s limit"
    assert len(stderr_lines(proc)) == 1, proc.stderr
    assert re.search(r"time limit", proc.stderr, re.I), proc.stderr
    assert "0.5" in proc.stderr


def test_run_memory_limit_exit_3(tmp_path: Path, engine: str) -> None:
    prog = script(
        tmp_path,
        'const a = [];\nwhile (true) { a.push("x".repeat(1000) + a.length); }\n',
    )
    proc = interp(
        "run", "--engine", engine, "--memory", "32", "--timeout", "20", prog, cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    assert len(stderr_lines(proc)) == 1, proc.stderr
    assert re.search(r"memory", proc.stderr, re.I), proc.stderr
    assert "time limit" not in proc.stderr


def test_run_tool_call_limit_exit_3(tmp_path: Path, engine: str) -> None:
    prog = script(
        tmp_path,
        "for (let i = 0; i < 10; i++) {\n"
        "  await tools.write_file({path: `f${i}.txt`, content: String(i)});\n"
        "}\n",
    )
    proc = interp("run", "--engine", engine, "--max-tool-calls", "3", prog, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert len(stderr_lines(proc)) == 1, proc.stderr
    assert re.search(r"tool call", proc.stderr, re.I), proc.stderr
    assert "3" in proc.stderr
    written = sorted(p.name for p in tmp_path.glob("f*.txt"))
    assert written == ["f0.txt", "f1.txt", "f2.txt"]


def test_run_under_tool_call_limit_is_fine(tmp_path: Path) -> None:
    prog = script(tmp_path, "for (let i = 0; i < 3; i++) await tools.list_dir({});\nreturn 1;\n")
    proc = interp("run", "--max-tool-calls", "3", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


# --- run: usage errors -----------------------------------------------------------------


def assert_usage_error(proc: subprocess.CompletedProcess[str], *mentions: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = stderr_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert "error" in lines[0].lower()
    for word in mentions:
        assert word in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_usage_missing_script(tmp_path: Path) -> None:
    proc = interp("run", tmp_path / "no-such-script.js", cwd=tmp_path)
    assert_usage_error(proc, "no-such-script.js")


def test_usage_unknown_engine(tmp_path: Path) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", "--engine", "spidermonkey", prog, cwd=tmp_path)
    assert_usage_error(proc, "--engine", "spidermonkey")


def test_usage_non_numeric_timeout(tmp_path: Path) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", "--timeout", "abc", prog, cwd=tmp_path)
    assert_usage_error(proc, "--timeout", "abc")


def test_usage_non_numeric_memory(tmp_path: Path) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", "--memory", "lots", prog, cwd=tmp_path)
    assert_usage_error(proc, "--memory", "lots")


@pytest.mark.parametrize(
    "option",
    [["--timeout", "0"], ["--timeout", "-1"], ["--memory", "0"], ["--max-tool-calls", "0"]],
)
def test_usage_out_of_range_limits(tmp_path: Path, option: list[str]) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", *option, prog, cwd=tmp_path)
    assert_usage_error(proc, option[0])


def test_usage_missing_cwd(tmp_path: Path) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", "--cwd", tmp_path / "nowhere", prog, cwd=tmp_path)
    assert_usage_error(proc, "--cwd")


# --- run: engines ----------------------------------------------------------------------


def test_engine_v8_runs_simple_script(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        'console.log("v8 says hi");\n'
        'const r = await tools.write_file({path: "v8.txt", content: "ok"});\n'
        "return {created: r.created, argv};\n",
    )
    proc = interp("run", "--engine", "v8", prog, "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n", 1)
    assert lines[0] == "v8 says hi"
    assert json.loads(lines[1]) == {"created": True, "argv": ["x"]}
    assert (tmp_path / "v8.txt").read_text() == "ok"


def test_engine_v8_reported_in_json(tmp_path: Path) -> None:
    prog = script(tmp_path, "return 1;\n")
    proc = interp("run", "--engine", "v8", "--json", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["engine"] == "v8"


# --- run --json ------------------------------------------------------------------------


def test_json_success(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        'console.log("logged");\n'
        'await tools.write_file({path: "j.txt", content: "J"});\n'
        'const l = await tools.list_dir({path: "."});\n'
        "return {n: l.entries.length};\n",
    )
    proc = interp("run", "--json", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert isinstance(data, dict)
    for key in ("ok", "value", "logs", "tool_calls", "error"):
        assert key in data
    assert data["ok"] is True
    assert data["error"] is None
    assert data["value"] == {"n": 2}  # prog.js and j.txt
    assert [entry["text"] for entry in data["logs"]] == ["logged"]
    calls = data["tool_calls"]
    assert [c["name"] for c in calls] == ["write_file", "list_dir"]
    assert calls[0]["args"] == {"path": "j.txt", "content": "J"}
    assert calls[1]["args"] == {"path": "."}
    for call in calls:
        assert call["ok"] is True
        assert isinstance(call["duration_ms"], int | float)
        assert call["duration_ms"] >= 0


def test_json_script_error(tmp_path: Path) -> None:
    prog = script(tmp_path, 'console.log("a");\n\nthrow new RangeError("out of range");\n')
    proc = interp("run", "--json", prog, cwd=tmp_path)
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    error = data["error"]
    assert error["name"] == "RangeError"
    assert error["message"] == "out of range"
    assert error["line"] == 3
    assert isinstance(error["column"], int) and error["column"] >= 1
    assert [entry["text"] for entry in data["logs"]] == ["a"]


def test_json_syntax_error(tmp_path: Path) -> None:
    prog = script(tmp_path, "let ok = 1;\nlet = = 2;\n")
    proc = interp("run", "--json", prog, cwd=tmp_path)
    assert proc.returncode == 1
    error = json.loads(proc.stdout)["error"]
    assert error["name"] == "SyntaxError"
    assert error["line"] == 2
    assert isinstance(error["column"], int)


def test_json_failed_tool_call_recorded(tmp_path: Path) -> None:
    prog = script(
        tmp_path,
        'try { await tools.read_file({path: "missing.txt"}); } catch (e) {}\nreturn "done";\n',
    )
    proc = interp("run", "--json", prog, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["value"] == "done"
    [call] = data["tool_calls"]
    assert call["name"] == "read_file"
    assert call["ok"] is False


def test_json_limit_keeps_exit_3(tmp_path: Path) -> None:
    prog = script(tmp_path, "for (let i = 0; i < 10; i++) await tools.list_dir({});\n")
    proc = interp("run", "--json", "--max-tool-calls", "3", prog, cwd=tmp_path)
    assert proc.returncode == 3
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    assert data["error"]["name"]
    assert "tool call" in data["error"]["message"]


# --- tools -----------------------------------------------------------------------------

# What a native session offers (`interpreter tools` lists a session's tools).
TOOL_NAMES = [
    "shell", "apply_patch", "read_file", "write_file", "list_dir", "glob", "grep", "update_plan"
]


def test_tools_dts(tmp_path: Path) -> None:
    proc = interp("tools", "--dts", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dts = proc.stdout
    assert "declare const tools" in dts
    assert "shell(args: ShellArgs): Promise<ShellResult>;" in dts
    for name in TOOL_NAMES:
        pattern = rf"^\s*{name}\(args\??: (?:string \| )?\w+\): Promise<\w+>;"
        assert re.search(pattern, dts, re.M), name


def test_tools_dts_doc_comments_close_only_at_their_end(tmp_path: Path) -> None:
    dts = interp("tools", "--dts", cwd=tmp_path).stdout
    blocks = list(re.finditer(r"/\*\*(.*?)\*/", dts, re.S))
    assert len(blocks) > 10
    for block in blocks:
        # The first "*/" after "/**" ends the comment; anything after it on the same line
        # means a "*/" inside the text (e.g. "**/*.py") closed the comment early.
        rest_of_line = dts[block.end() :].split("\n", 1)[0]
        assert rest_of_line.strip() == "", f"comment closed early: {block.group(0)!r}"
    assert dts.count("*/") == len(blocks)
    # The glob examples must still be there, escaped.
    assert "**\\/*.py" in dts


def test_tools_json(tmp_path: Path) -> None:
    proc = interp("tools", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    schemas = json.loads(proc.stdout)
    assert [s["name"] for s in schemas] == TOOL_NAMES
    for s in schemas:
        assert s["description"]
        assert s["parameters"]["type"] == "object"
    shell = schemas[0]
    assert "command" in shell["parameters"]["properties"]


def test_tools_plain_listing(tmp_path: Path) -> None:
    proc = interp("tools", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == TOOL_NAMES


# --- help / start-up -------------------------------------------------------------------


def test_help_exit_0(tmp_path: Path) -> None:
    proc = interp("--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "run" in proc.stdout and "tools" in proc.stdout


def test_run_help_exit_0(tmp_path: Path) -> None:
    proc = interp("run", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for option in ("--engine", "--timeout", "--memory", "--max-tool-calls", "--cwd", "--json"):
        assert option in proc.stdout


def test_the_cli_package_uses_only_public_click_api() -> None:
    """The PROMPT-or-COMMAND root and the interactive options are built from click's
    documented API (resolve_command, Command.params), which survives click upgrades."""
    package = Path(__file__).resolve().parent.parent / "codemode" / "cli"
    private = re.compile(r"protected_args|__click_params__|\bctx\._\w")
    hits = [f"{f.name}: {line.strip()}" for f in sorted(package.glob("*.py"))
            for line in f.read_text().splitlines() if private.search(line)]
    assert hits == []


def test_python_m_codemode_cli_is_the_interpreter_command(tmp_path: Path) -> None:
    module = subprocess.run([sys.executable, "-m", "codemode.cli", "--help"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=30)
    assert module.returncode == 0, module.stderr
    assert module.stdout == interp("--help", cwd=tmp_path).stdout


def test_the_interactive_root_takes_execs_session_options(tmp_path: Path) -> None:
    root = interp("--help", cwd=tmp_path).stdout
    exec_help = interp("exec", "--help", cwd=tmp_path).stdout
    for option in ("--model", "--provider", "--code-mode", "--harness", "--max-turns",
                   "--sandbox", "--full-auto", "--config"):
        assert option in root and option in exec_help
    assert "--json" in exec_help and "--json" not in root


def test_help_does_not_import_heavy_modules(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import codemode.cli\n"
        "try:\n"
        "    codemode.cli.main(['--help'])\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "else:\n"
        "    code = 'no exit'\n"
        "heavy = {'quickjs', '_quickjs', 'py_mini_racer', 'httpx', 'tree_sitter',\n"
        "         'grpc', 'google'}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "bad += ['codemode.js_runtime.v8_abi'] * ('codemode.js_runtime.v8_abi' in sys.modules)\n"
        "maps = open('/proc/self/maps').read()\n"  # V8 is loaded without its package
        "bad += ['libmini_racer'] * ('libmini_racer' in maps)\n"
        "print('EXIT', code)\n"
        "print('HEAVY', bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert "EXIT 0\n" in proc.stdout or "EXIT None\n" in proc.stdout, proc.stdout
    assert "HEAVY []\n" in proc.stdout, proc.stdout


def test_contradictory_sandbox_flags_are_refused_before_the_command_starts(
    tmp_path: Path,
) -> None:
    # codemode.sandbox resolves the modes click-free; the CLI's sandbox_options turns a
    # conflict into a usage error for every command that takes the flags.
    prog = script(tmp_path, "return 1\n")
    home = tmp_path / "home"
    env = {**os.environ, "CODEMODE_HOME": str(home)}
    for args in (
        ["run", "--full-auto", "--approval", "never", prog],
        ["exec", "--full-auto", "-s", "read-only", "hi"],
        ["mcp-server", "--full-auto", "-s", "read-only"],
        ["acp", "--full-auto", "--approval", "never"],
    ):
        proc = subprocess.run(
            [str(INTERPRETER), *map(str, args)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2, (args, proc.stderr)
        assert stderr_lines(proc) == [
            f"interpreter {args[0]}: error: --full-auto cannot be combined with --sandbox or "
            "--approval"
        ], args
    assert not (home / "sessions").exists()


def test_batch_usage_errors_are_usage_errors_and_run_nothing(tmp_path: Path) -> None:
    # codemode.batch raises its own BatchUsageError; the CLI reports it (exit 2) before
    # any repository is copied or any report is written.
    prog = script(tmp_path, "return 1\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    home = tmp_path / "home"
    env = {**os.environ, "CODEMODE_HOME": str(home)}
    for args, message in (
        (["--ray-address", "auto"], "--ray-address needs --backend ray"),
        (["--only-failed"], "--only-failed goes with --resume REPORT"),
        (["--push", "origin"], "--push goes with --branch NAME"),
        (["--branch", "b"], "--branch needs --commit-message MSG"),
    ):
        proc = subprocess.run(
            [str(INTERPRETER), "run", prog, "--repos", repo, *args], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2, (args, proc.stderr)
        assert stderr_lines(proc) == [f"interpreter run: error: {message}"], args
    assert not (home / "batch").exists()
    assert [p.name for p in repo.iterdir()] == []
