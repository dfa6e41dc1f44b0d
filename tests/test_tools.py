"""Tests for the built-in tools, driven through ToolRegistry.invoke as every surface is."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.tool_terms.elide import elide_middle
from codemode.tools import ToolContext, ToolError, builtin_registry
from codemode.tools.builtin import builtin_tools
from codemode.tools.glob_pattern import compile_glob
from codemode.tools.shell import MAX_OUTPUT_CHARS, OutputCapture


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path


async def call(ws: Path, name: str, **args: Any) -> Any:
    return await builtin_registry().invoke(name, args, ToolContext(workspace=ws))


async def call_error(ws: Path, name: str, **args: Any) -> str:
    with pytest.raises(ToolError) as info:
        await call(ws, name, **args)
    return str(info.value)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a killed parent may linger as a zombie until init reaps it.
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return status != "Z"


def test_builtin_order() -> None:
    assert [t.name for t in builtin_tools()] == [
        "shell",
        "apply_patch",
        "read_file",
        "write_file",
        "list_dir",
        "glob",
        "grep",
    ]


# --- shell -----------------------------------------------------------------------------


async def test_shell_exit_code_and_interleaved_output(ws: Path) -> None:
    r = await call(ws, "shell", command="echo one; echo two >&2; echo three; exit 3")
    assert r["exit_code"] == 3
    assert r["output"] == "one\ntwo\nthree\n"
    assert r["timed_out"] is False
    assert r["truncated"] is False
    assert r["duration_ms"] >= 0


async def test_shell_workdir_and_environment(ws: Path) -> None:
    (ws / "sub").mkdir()
    r = await call(ws, "shell", command='pwd; echo "$PAGER $TERM $NO_COLOR"', workdir="sub")
    lines = r["output"].splitlines()
    assert Path(lines[0]).resolve() == (ws / "sub").resolve()
    assert lines[1] == "cat dumb 1"
    r = await call(ws, "shell", command="pwd")
    assert Path(r["output"].strip()).resolve() == ws.resolve()


async def test_shell_bad_workdir(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    assert "not a directory" in await call_error(ws, "shell", command="true", workdir="f.txt")
    assert "not a directory" in await call_error(ws, "shell", command="true", workdir="nope")


async def test_shell_has_no_stdin(ws: Path) -> None:
    r = await call(ws, "shell", command="cat; echo done", timeout_ms=5000)
    assert r["output"] == "done\n"
    assert r["timed_out"] is False


async def test_shell_signal_exit_code(ws: Path) -> None:
    r = await call(ws, "shell", command="kill -TERM $$")
    assert r["exit_code"] == 128 + 15


async def test_shell_timeout_kills_process_group(ws: Path) -> None:
    began = time.monotonic()
    r = await call(ws, "shell", command="sleep 30 & echo $!; echo started; wait", timeout_ms=300)
    assert time.monotonic() - began < 5
    assert r["timed_out"] is True
    assert r["exit_code"] == 124
    pid_line, started = r["output"].splitlines()[:2]
    assert started == "started"
    pid = int(pid_line)
    for _ in range(50):  # the kill is delivered at once, but give the kernel a moment
        if not pid_alive(pid):
            break
        await asyncio.sleep(0.02)
    assert not pid_alive(pid)


async def test_shell_background_job_holding_pipe_does_not_hang(ws: Path) -> None:
    began = time.monotonic()
    r = await call(ws, "shell", command="sleep 30 & echo done", timeout_ms=20_000)
    assert time.monotonic() - began < 5
    assert r["timed_out"] is False
    assert r["exit_code"] == 0
    assert r["output"] == "done\n"


async def test_shell_cancellation_kills_process_group(ws: Path) -> None:
    pid_file = ws / "pid"
    task = asyncio.create_task(
        call(ws, "shell", command=f"sleep 30 & echo $! > {pid_file}; wait", timeout_ms=20_000)
    )
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):
        if not pid_alive(pid):
            break
        await asyncio.sleep(0.02)
    assert not pid_alive(pid)


async def test_shell_output_truncation_keeps_head_and_tail(ws: Path) -> None:
    # 3x the cap: the beginning and the end must both survive, the middle must not.
    count = MAX_OUTPUT_CHARS * 3 // 8
    cmd = f"echo FIRST; seq -f 'x%06g' {count}; echo LAST"
    r = await call(ws, "shell", command=cmd, timeout_ms=30_000)
    out = r["output"]
    assert r["truncated"] is True
    assert out.startswith("FIRST\nx000001\n")
    assert out.endswith(f"x{count:06d}\nLAST\n")
    assert "characters elided ...]" in out
    assert f"x{count // 2:06d}\n" not in out
    assert len(out) <= MAX_OUTPUT_CHARS + 100
    total = len("FIRST\nLAST\n") + 8 * count
    elided = int(out.split("[... ", 1)[1].split(" ", 1)[0])
    assert elided == total - MAX_OUTPUT_CHARS


async def test_shell_huge_output_stays_bounded(ws: Path) -> None:
    # Far beyond what is buffered in full, so the middle is dropped while reading.
    count = MAX_OUTPUT_CHARS - 1  # %g would print the millionth line as 1e+06
    r = await call(ws, "shell", command=f"seq -f 'y%07g' {count}", timeout_ms=30_000)
    out = r["output"]
    assert r["truncated"] is True
    assert out.startswith("y0000001\n") and out.endswith(f"y{count:07d}\n")
    elided = int(out.split("[... ", 1)[1].split(" ", 1)[0])
    assert elided == 9 * count - MAX_OUTPUT_CHARS


def test_capture_counts_characters_not_bytes() -> None:
    capture = OutputCapture()
    chars = 3 * MAX_OUTPUT_CHARS  # 2 bytes each: 6 MB, more than both windows hold
    for _ in range(chars // 1000):
        capture.add(("é" * 1000).encode())
    text, cut = capture.text()
    assert cut is True
    head, rest = text.split("\n[... ", 1)
    elided, tail = rest.split(" characters elided ...]\n", 1)
    assert set(head) == set(tail) == {"é"}
    assert len(head) + int(elided) + len(tail) == chars


def test_elide_middle() -> None:
    text, cut = elide_middle("a" * 10 + "b" * 10, 10)
    assert cut is True
    assert text == "aaaaa\n[... 10 characters elided ...]\nbbbbb"
    assert elide_middle("short", 10) == ("short", False)


async def test_shell_validation_errors_name_the_field(ws: Path) -> None:
    assert await call_error(ws, "shell") == 'tools.shell: "command" is required'
    msg = await call_error(ws, "shell", command="true", timeout_ms="soon")
    assert '"timeout_ms" must be an integer' in msg
    msg = await call_error(ws, "shell", command="true", cwd="/")
    assert 'unknown field "cwd"' in msg
    assert '"timeout_ms"' in await call_error(ws, "shell", command="true", timeout_ms=0)


# --- read_file -------------------------------------------------------------------------


async def test_read_file_whole_and_window(ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    r = await call(ws, "read_file", path="f.txt")
    assert r["path"] == "f.txt"
    assert r["content"].startswith("line 1\n") and r["content"].endswith("line 10\n")
    assert (r["start_line"], r["end_line"], r["total_lines"], r["truncated"]) == (1, 10, 10, False)

    r = await call(ws, "read_file", path="f.txt", offset=3, limit=2)
    assert r["content"] == "line 3\nline 4\n"
    assert (r["start_line"], r["end_line"], r["total_lines"], r["truncated"]) == (3, 4, 10, True)

    r = await call(ws, "read_file", path="f.txt", offset=9, limit=5)
    assert r["content"] == "line 9\nline 10\n"
    assert (r["end_line"], r["truncated"]) == (10, False)


async def test_read_file_keeps_crlf_and_missing_final_newline(ws: Path) -> None:
    (ws / "dos.txt").write_bytes(b"a\r\nb\r\nc")
    r = await call(ws, "read_file", path="dos.txt", offset=2)
    assert r["content"] == "b\r\nc"
    assert r["total_lines"] == 3


async def test_read_file_outside_workspace_allowed(ws: Path, tmp_path_factory: Any) -> None:
    other = tmp_path_factory.mktemp("elsewhere") / "x.txt"
    other.write_text("hello\n")
    r = await call(ws, "read_file", path=str(other))
    assert r["content"] == "hello\n"
    assert r["path"] == str(other)


async def test_read_file_errors(ws: Path) -> None:
    assert await call_error(ws, "read_file", path="foo.txt") == "read_file: no such file: foo.txt"
    (ws / "d").mkdir()
    assert "d is a directory; use tools.list_dir" in await call_error(ws, "read_file", path="d")
    (ws / "bin").write_bytes(b"\x7fELF\x00\x01\x02")
    assert "binary" in await call_error(ws, "read_file", path="bin")
    (ws / "short.txt").write_text("a\nb\n")
    msg = await call_error(ws, "read_file", path="short.txt", offset=5)
    assert "offset 5" in msg and "has 2 lines" in msg
    assert '"offset"' in await call_error(ws, "read_file", path="short.txt", offset=0)


async def test_read_file_empty(ws: Path) -> None:
    (ws / "empty").write_text("")
    r = await call(ws, "read_file", path="empty")
    assert (r["content"], r["total_lines"], r["truncated"]) == ("", 0, False)


# --- write_file ------------------------------------------------------------------------


async def test_write_file_creates_parents(ws: Path) -> None:
    r = await call(ws, "write_file", path="a/b/c.txt", content="héllo\n")
    assert r == {"path": "a/b/c.txt", "bytes_written": 7, "created": True}
    assert (ws / "a/b/c.txt").read_text(encoding="utf-8") == "héllo\n"
    r = await call(ws, "write_file", path="a/b/c.txt", content="x")
    assert r["created"] is False
    assert (ws / "a/b/c.txt").read_text() == "x"
    assert sorted(p.name for p in (ws / "a/b").iterdir()) == ["c.txt"]  # no temp files left


async def test_write_file_refused_outside_workspace(ws: Path, tmp_path_factory: Any) -> None:
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "new" / "x.txt"
    msg = await call_error(ws, "write_file", path=str(target), content="no")
    assert "outside the workspace" in msg
    assert not (outside / "new").exists()
    msg = await call_error(ws, "write_file", path="../escape.txt", content="no")
    assert "outside the workspace" in msg
    assert not (ws.parent / "escape.txt").exists()


async def test_write_file_preserves_mode(ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o751)
    await call(ws, "write_file", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o751
    assert script.read_text() == "#!/bin/sh\necho hi\n"


async def test_write_file_to_directory_is_error(ws: Path) -> None:
    (ws / "d").mkdir()
    assert "is a directory" in await call_error(ws, "write_file", path="d", content="")


# --- list_dir --------------------------------------------------------------------------


def make_tree(ws: Path) -> None:
    (ws / "src/pkg").mkdir(parents=True)
    (ws / "src/pkg/mod.py").write_text("x = 1\n")
    (ws / "src/main.py").write_text("print()\n")
    (ws / "README.md").write_text("# hi\n")
    (ws / ".env").write_text("SECRET=1\n")
    (ws / ".git").mkdir()
    (ws / ".git/HEAD").write_text("ref\n")


async def test_list_dir_depth(ws: Path) -> None:
    make_tree(ws)
    r = await call(ws, "list_dir")
    assert [(e["path"], e["type"]) for e in r["entries"]] == [
        ("README.md", "file"),
        ("src", "dir"),
    ]
    assert r["entries"][0]["size"] == 5 and r["entries"][1]["size"] is None
    r = await call(ws, "list_dir", depth=3)
    assert [e["path"] for e in r["entries"]] == [
        "README.md",
        "src",
        "src/main.py",
        "src/pkg",
        "src/pkg/mod.py",
    ]
    assert r["truncated"] is False
    r = await call(ws, "list_dir", path="src", depth=2)
    assert [e["path"] for e in r["entries"]] == ["main.py", "pkg", "pkg/mod.py"]


async def test_list_dir_hidden_and_symlinks(ws: Path) -> None:
    make_tree(ws)
    (ws / "link").symlink_to("src")
    r = await call(ws, "list_dir", include_hidden=True)
    kinds = {e["path"]: e["type"] for e in r["entries"]}
    assert kinds == {".env": "file", "README.md": "file", "link": "symlink", "src": "dir"}


async def test_list_dir_errors(ws: Path) -> None:
    assert '"depth"' in await call_error(ws, "list_dir", depth=6)
    assert "no such directory" in await call_error(ws, "list_dir", path="nope")
    (ws / "f").write_text("")
    assert "not a directory" in await call_error(ws, "list_dir", path="f")


# --- glob ------------------------------------------------------------------------------


def test_compile_glob() -> None:
    assert compile_glob("**/*.py").fullmatch("a.py")
    assert compile_glob("**/*.py").fullmatch("x/y/a.py")
    assert not compile_glob("*.py").fullmatch("x/a.py")
    assert compile_glob("src/**").fullmatch("src/a/b.ts")
    assert compile_glob("a/**/b.txt").fullmatch("a/b.txt")
    assert compile_glob("*.{ts,tsx}").fullmatch("x.tsx")
    assert compile_glob("file[0-9].txt").fullmatch("file3.txt")
    assert not compile_glob("file[!0-9].txt").fullmatch("file3.txt")
    assert compile_glob("a+b(1).txt").fullmatch("a+b(1).txt")


def make_ignored_tree(ws: Path) -> None:
    (ws / "top.py").write_text("TODO root\n")
    (ws / "pkg/sub").mkdir(parents=True)
    (ws / "pkg/mod.py").write_text("TODO pkg\n")
    (ws / "pkg/gen.py").write_text("TODO generated\n")
    (ws / "pkg/sub/deep.py").write_text("todo deep\n")
    (ws / "build").mkdir()
    (ws / "build/out.py").write_text("TODO build\n")
    (ws / "debug.log").write_text("TODO log\n")
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "pkg/.gitignore").write_text("gen.py\n")


async def test_glob_recursive_includes_root(ws: Path) -> None:
    make_ignored_tree(ws)
    r = await call(ws, "glob", pattern="**/*.py")
    whole = {"matches": ["pkg/mod.py", "pkg/sub/deep.py", "top.py"], "truncated": False}
    assert r == {**whole, "note": None}
    r = await call(ws, "glob", pattern="*.py")
    assert r["matches"] == ["top.py"]
    r = await call(ws, "glob", pattern="pkg/*.py")
    assert r["matches"] == ["pkg/mod.py"]


async def test_glob_include_ignored(ws: Path) -> None:
    make_ignored_tree(ws)
    r = await call(ws, "glob", pattern="**/*.py", include_ignored=True)
    assert r["matches"] == [
        "build/out.py",
        "pkg/gen.py",
        "pkg/mod.py",
        "pkg/sub/deep.py",
        "top.py",
    ]
    r = await call(ws, "glob", pattern="**/*.log", include_ignored=True)
    assert r["matches"] == ["debug.log"]


async def test_glob_from_subdirectory_honours_parent_gitignore(ws: Path) -> None:
    make_ignored_tree(ws)
    (ws / "pkg/trace.log").write_text("x\n")
    r = await call(ws, "glob", pattern="**/*", path="pkg")
    assert r["matches"] == ["pkg/.gitignore", "pkg/mod.py", "pkg/sub/deep.py"]


async def test_nested_gitignore_negation_overrides_parent(ws: Path) -> None:
    make_ignored_tree(ws)
    (ws / "pkg/keep.log").write_text("x\n")
    (ws / "pkg/.gitignore").write_text("gen.py\n!keep.log\n")
    r = await call(ws, "glob", pattern="**/*.log")
    assert r["matches"] == ["pkg/keep.log"]


async def test_glob_skips_git_dir_and_bad_path(ws: Path) -> None:
    make_tree(ws)
    r = await call(ws, "glob", pattern="**/*", include_ignored=True)
    assert not any(m.startswith(".git/") for m in r["matches"])
    assert "no such directory" in await call_error(ws, "glob", pattern="*", path="nope")


# --- grep ------------------------------------------------------------------------------


async def test_grep_finds_path_line_text(ws: Path) -> None:
    make_ignored_tree(ws)
    (ws / "notes.md").write_text("nothing\nsee TODO here  \r\n")
    r = await call(ws, "grep", pattern="TODO")
    found = {(m["path"], m["line"], m["text"]) for m in r["matches"]}
    assert found == {
        ("top.py", 1, "TODO root"),
        ("pkg/mod.py", 1, "TODO pkg"),
        ("notes.md", 2, "see TODO here  "),
    }
    assert r["truncated"] is False
    # .gitignore (root and nested) keeps build/, debug.log and pkg/gen.py out.
    assert r["files_searched"] == 6  # top.py, notes.md, both .gitignores, mod.py, deep.py


async def test_grep_glob_filter_and_case(ws: Path) -> None:
    make_ignored_tree(ws)
    (ws / "notes.md").write_text("TODO md\n")
    r = await call(ws, "grep", pattern="todo", glob="*.py", case_insensitive=True)
    assert sorted(m["path"] for m in r["matches"]) == ["pkg/mod.py", "pkg/sub/deep.py", "top.py"]
    r = await call(ws, "grep", pattern="todo", glob="pkg/**/*.py")
    assert [m["path"] for m in r["matches"]] == ["pkg/sub/deep.py"]
    r = await call(ws, "grep", pattern="TODO", path="pkg")
    assert [m["path"] for m in r["matches"]] == ["pkg/mod.py"]


async def test_grep_single_file_and_max_results(ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * 10)
    r = await call(ws, "grep", pattern="hit", path="many.txt", max_results=3)
    assert [m["line"] for m in r["matches"]] == [1, 2, 3]
    assert r["truncated"] is True
    assert r["matches"][0]["path"] == "many.txt"


async def test_grep_long_lines_are_cut(ws: Path) -> None:
    (ws / "long.txt").write_text("needle" + "x" * 2000 + "\n")
    r = await call(ws, "grep", pattern="needle")
    assert len(r["matches"][0]["text"]) == 500


async def test_grep_skips_binary_files(ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"needle\x00\x01\x02needle")
    (ws / "text.txt").write_text("needle\n")
    r = await call(ws, "grep", pattern="needle")
    assert [m["path"] for m in r["matches"]] == ["text.txt"]
    assert r["files_searched"] == 1


async def test_grep_invalid_regex(ws: Path) -> None:
    msg = await call_error(ws, "grep", pattern="foo(")
    assert msg.startswith("grep: invalid regular expression 'foo(':")
    assert "missing )" in msg


async def test_grep_missing_path(ws: Path) -> None:
    assert "no such file or directory" in await call_error(ws, "grep", pattern="x", path="nope")


# --- registry --------------------------------------------------------------------------


async def test_unknown_tool_suggests_closest(ws: Path) -> None:
    msg = await call_error(ws, "read_fil", path="x")
    assert msg == "tools.read_fil is not a tool — did you mean tools.read_file?"
    msg = await call_error(ws, "zzzzzz")
    assert msg == "tools.zzzzzz is not a tool"
