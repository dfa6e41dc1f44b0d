"""The file tools attacked as a hostile program would: a .gitignore that is a FIFO, a
link to /dev/zero or thousands of lines long; protected folders named in another case;
hard links to files outside; /proc/self/root; searches and reads whose output would be
enormous; a patch whose last write fails. Real files, FIFOs and links in a temporary
workspace; anything that could hang runs in a child process with a deadline."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.tools.context import ToolContext, ToolError
from codemode.tools.grep import GREP, MAX_GREP_MATCHES
from codemode.tools.read_file import READ_FILE
from tests.file_tools_support import call, call_error, registry


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    return o


# --- a hostile .gitignore ------------------------------------------------------------

# Runs grep and glob over the workspace in a child process: a walk that blocks on a
# FIFO would otherwise hang the test run itself (a worker thread cannot be stopped).
SEARCH_CHILD = """
import asyncio, json, sys
from pathlib import Path
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext

async def main():
    ctx = ToolContext(workspace=Path(sys.argv[1]))
    reg = builtin_registry()
    found = await reg.invoke("grep", {"pattern": "needle"}, ctx)
    names = await reg.invoke("glob", {"pattern": "**/*.txt"}, ctx)
    print(json.dumps([[m["path"] for m in found["matches"]], names["matches"]]))

asyncio.run(main())
"""


def _search_in_child(ws: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", SEARCH_CHILD, str(ws)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "proc-environ"])
def test_a_gitignore_that_is_no_regular_file_is_passed_over(ws: Path, kind: str) -> None:
    # was: a FIFO .gitignore blocked the walk for good (the worker thread never came
    # back, and the process could not exit); a link to /dev/zero read until memory ran out
    (ws / "a.txt").write_text("needle\n")
    sub = ws / "sub"
    sub.mkdir()
    (sub / "b.txt").write_text("needle\n")
    if kind == "fifo":
        os.mkfifo(sub / ".gitignore")
    elif kind == "dev-zero":
        os.symlink("/dev/zero", sub / ".gitignore")
    else:
        os.symlink("/proc/self/environ", sub / ".gitignore")
    started = time.monotonic()
    out = _search_in_child(ws)
    assert out == '[["a.txt", "sub/b.txt"], ["a.txt", "sub/b.txt"]]', out
    assert time.monotonic() - started < 50


def test_an_oversized_gitignore_is_not_honoured(ws: Path) -> None:
    from codemode.tools.ignore_rules import MAX_GITIGNORE_BYTES

    (ws / "a.txt").write_text("needle\n")
    (ws / ".gitignore").write_text("a.txt\n" + "#" * MAX_GITIGNORE_BYTES)
    found = asyncio.run(call(ws, "glob", pattern="*.txt"))
    assert found["matches"] == ["a.txt"]  # searching more, never less


def test_a_gitignore_line_git_cannot_use_is_dropped_not_fatal(ws: Path) -> None:
    # was: "tools.glob failed: GitIgnorePatternError: Invalid git pattern: '!'" for every
    # search below the folder
    (ws / "a.txt").write_text("needle\n")
    (ws / "b.log").write_text("needle\n")
    (ws / ".gitignore").write_text("!\nx\\\n*.log\n[unclosed\n")
    assert asyncio.run(call(ws, "glob", pattern="*"))["matches"] == [".gitignore", "a.txt"]
    found = asyncio.run(call(ws, "grep", pattern="needle"))
    assert [m["path"] for m in found["matches"]] == ["a.txt"]


def test_a_gitignore_of_thousands_of_lines_still_applies(ws: Path) -> None:
    # was: "tools.glob failed: Error: failed to compile Set" (pathspec's RE2 backend
    # compiles every line into one set, and a long file is past RE2's memory budget)
    for i in range(300):
        (ws / f"f{i}.txt").write_text("needle\n")
    (ws / "secret.txt").write_text("needle\n")
    (ws / "keep.log").write_text("needle\n")
    lines = [f"pattern{i}*x/**/y{i}" for i in range(10_000)]
    lines[5000] = "*.log"
    lines.append("secret.txt")
    lines.append("!keep.log")  # re-included by the last line
    (ws / ".gitignore").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    found = asyncio.run(call(ws, "glob", pattern="*"))
    elapsed = time.monotonic() - started
    assert "secret.txt" not in found["matches"]
    assert "keep.log" in found["matches"] and "f299.txt" in found["matches"]
    assert len(found["matches"]) == 300 + 2  # keep.log, and the .gitignore itself
    grep = asyncio.run(call(ws, "grep", pattern="needle"))
    assert len(grep["matches"]) == 301
    # 10,000 patterns over 300 files one by one took ~5 s here; in groups, well under.
    assert elapsed < 30, elapsed


# --- protected folders by another name -----------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".GIT/hooks/pre-commit",
        ".Git/config",
        ".git./hooks/pre-commit",
        ".git /hooks/pre-commit",
        "GIT~1/hooks/pre-commit",
        "sub/.GIT/hooks/post-checkout",
        ".CODEMODE/config.toml",
        ".codemode./rules/x.rules",
        "CODEMO~1/config.toml",
    ],
)
def test_protected_folders_are_refused_in_any_case(ws: Path, path: str) -> None:
    # On a case-insensitive filesystem (a Windows drive under WSL, vfat, casefolded
    # ext4) these are .git/hooks and .codemode; was: written
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    before = sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*"))
    for tool, args in (
        ("write_file", {"path": path, "content": "x\n"}),
        ("edit", {"path": path, "old_string": "", "new_string": "x\n"}),
        ("apply_patch", {"input": f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n"}),
    ):
        message = asyncio.run(call_error(ws, tool, **args))
        assert "read-only" in message, (tool, message)
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*")) == before


def test_names_that_only_resemble_protected_folders_are_written(ws: Path) -> None:
    for path in (".github/workflows/ci.yml", ".gitignore", "git/x", ".codemodex/y", "a.git/b"):
        asyncio.run(call(ws, "write_file", path=path, content="x\n"))
        assert (ws / path).read_text() == "x\n"


# --- escapes that are already closed (confirmed) -------------------------------------


def test_a_hard_link_to_a_file_outside_is_replaced_not_written_through(
    ws: Path, outside: Path
) -> None:
    secret = outside / "secret"
    secret.write_text("outside\n")
    os.link(secret, ws / "link")
    asyncio.run(call(ws, "write_file", path="link", content="one\n"))
    asyncio.run(call(ws, "edit", path="link", old_string="one", new_string="two"))
    patch = "*** Begin Patch\n*** Update File: link\n@@\n-two\n+three\n*** End Patch\n"
    asyncio.run(call(ws, "apply_patch", input=patch))
    assert (ws / "link").read_text() == "three\n"
    assert secret.read_text() == "outside\n" and os.stat(secret).st_nlink == 1


@pytest.mark.parametrize(
    "path",
    [
        "/proc/self/root/proc/self/environ",
        "/proc/thread-self/root/proc/thread-self/environ",
        "/dev/fd/0",
    ],
)
def test_proc_and_fd_links_lead_nowhere_readable(ws: Path, path: str) -> None:
    message = asyncio.run(call_error(ws, "read_file", path=path))
    assert "refusing to read" in message or "not a regular file" in message, message


def test_writes_through_proc_self_root_stay_under_the_same_rules(ws: Path, outside: Path) -> None:
    message = asyncio.run(
        call_error(ws, "write_file", path=f"/proc/self/root{outside}/x", content="x")
    )
    assert "refusing to write" in message, message
    assert not (outside / "x").exists()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    message = asyncio.run(
        call_error(ws, "write_file", path=f"/proc/self/root{ws}/.git/hooks/pre-commit", content="x")
    )
    assert "read-only" in message or "refusing" in message, message
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_a_patch_whose_last_write_fails_changes_nothing(ws: Path) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    # The name passes every check and fails only when written (over 255 bytes).
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n"
        "*** Delete File: b.txt\n*** Add File: new/dir/c.txt\n+c\n"
        f"*** Add File: {'n' * 300}\n+x\n*** End Patch\n"
    )
    message = asyncio.run(call_error(ws, "apply_patch", input=patch))
    assert "no file was changed" in message and "restored" in message, message
    assert (ws / "a.txt").read_text() == "one\n" and (ws / "b.txt").read_text() == "bee\n"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt", "b.txt"]


# --- outputs that would be enormous --------------------------------------------------


def test_grep_never_returns_more_than_its_cap(ws: Path) -> None:
    # was: max_results=10**9 and "^" over two million empty lines built two million
    # matches (14 s, hundreds of MB)
    (ws / "nl.txt").write_text("\n" * (3 * MAX_GREP_MATCHES))
    found = asyncio.run(call(ws, "grep", pattern="^", max_results=10**9))
    assert len(found["matches"]) == MAX_GREP_MATCHES and found["truncated"] is True
    found = asyncio.run(call(ws, "grep", pattern="^", max_results=7))
    assert len(found["matches"]) == 7 and found["truncated"] is True


def test_the_text_a_model_reads_of_a_huge_file_is_cut(ws: Path) -> None:
    # was: read_file's text (the classic dialect's reply) held the whole 20 MB file
    from codemode.tools.rendering import READ_TEXT_CHARS

    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1_000_000)))
    value = asyncio.run(call(ws, "read_file", path="big.txt"))
    assert value["total_lines"] == 1_000_000 and len(value["content"]) > 6_000_000
    text = READ_FILE.text(value)
    assert text is not None and len(text) < READ_TEXT_CHARS + 500
    last = text.splitlines()[-2]
    number = int(last.split("\t")[0])
    assert last.endswith(f"line {number - 1}")
    assert f"continue with offset={number + 1}" in text.splitlines()[-1]
    # One line longer than the whole budget: its start, and what to do.
    (ws / "min.js").write_text("x" * (3 * READ_TEXT_CHARS) + "\n")
    text = READ_FILE.text(asyncio.run(call(ws, "read_file", path="min.js")))
    assert text is not None and len(text) < READ_TEXT_CHARS + 500 and "line cut" in text


def test_the_text_of_a_huge_grep_is_cut(ws: Path) -> None:
    from codemode.tools.rendering import READ_TEXT_CHARS

    (ws / "wide.txt").write_text(("needle " + "x" * 400 + "\n") * 2000)
    value = asyncio.run(call(ws, "grep", pattern="needle", max_results=2000))
    assert len(value["matches"]) == 2000
    text = GREP.text(value)
    assert text is not None and len(text) < READ_TEXT_CHARS + 200
    assert text.endswith("more lines left out to keep this reply short]")


def test_read_file_text_numbers_lines_as_the_file_has_them(ws: Path) -> None:
    # was: str.splitlines broke at the form feed and U+2028 too, so every number after
    # them was off from the file's own (and from grep's)
    (ws / "f.txt").write_text("a\x0cb\nc\u2028d\ne\n")
    text = READ_FILE.text(asyncio.run(call(ws, "read_file", path="f.txt")))
    assert text == "1\ta\x0cb\n2\tc\u2028d\n3\te"
    assert [m["line"] for m in asyncio.run(call(ws, "grep", pattern="e"))["matches"]] == [3]


# --- links and names the kernel refuses ----------------------------------------------


def test_a_symlink_loop_does_not_sink_a_search(ws: Path) -> None:
    # was: "tools.glob: Too many levels of symbolic links" for the whole search
    (ws / "a.txt").write_text("needle\n")
    os.symlink("loop", ws / "loop")
    os.symlink("b", ws / "c")
    os.symlink("c", ws / "b")
    assert asyncio.run(call(ws, "glob", pattern="**/*"))["matches"] == ["a.txt"]
    found = asyncio.run(call(ws, "grep", pattern="needle"))
    assert [m["path"] for m in found["matches"]] == ["a.txt"]
    listed = asyncio.run(call(ws, "list_dir"))["entries"]
    assert {e["path"]: e["type"] for e in listed} == {
        "a.txt": "file",
        "b": "symlink",
        "c": "symlink",
        "loop": "symlink",
    }
    message = asyncio.run(call_error(ws, "read_file", path="loop"))
    assert "read_file:" in message and "loop" in message, message


def test_a_name_too_long_is_refused_by_each_tool_in_its_own_words(ws: Path) -> None:
    name = "n" * 300
    for tool, args, words in (
        ("write_file", {"path": name, "content": "x"}, "write_file: cannot write"),
        ("read_file", {"path": name}, "read_file: cannot read"),
        ("edit", {"path": name, "old_string": "a", "new_string": "b"}, "edit: cannot read"),
    ):
        message = asyncio.run(call_error(ws, tool, **args))
        # was: "tools.write_file: File name too long: nnn..." (the registry's fallback)
        assert message.startswith(words) and "File name too long" in message, message
    assert os.listdir(ws) == []
    message = asyncio.run(call_error(ws, "edit", path="/", old_string="a", new_string="b"))
    assert message == "edit: / is a directory, not a regular file", message


@pytest.mark.parametrize("path", ["/proc/kallsyms", "/proc/kpageflags", "/proc/kcore"])
def test_kernel_memory_is_not_readable(ws: Path, path: str) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    # was: /proc/kallsyms read (kernel addresses, as root), /proc/kpageflags "Invalid
    # argument" from the registry's fallback
    message = asyncio.run(call_error(ws, "read_file", path=path))
    assert "refusing to read" in message or "not a regular file" in message, message


def test_a_glob_without_doublestar_walks_only_as_deep_as_it_can_match(ws: Path) -> None:
    from codemode.tools.ignore import walk_files

    (ws / "top.py").write_text("x\n")
    deep = ws / "src" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (ws / "src" / "one.py").write_text("x\n")
    for i in range(200):
        (deep / f"f{i}.py").write_text("x\n")
    polls = 0

    def stop() -> bool:
        nonlocal polls
        polls += 1
        return False

    assert list(walk_files(ws, stop=stop, max_depth=1)) == ["top.py"]
    shallow = polls
    polls = 0
    assert len(list(walk_files(ws, stop=stop))) == 202
    assert shallow * 20 < polls, (shallow, polls)  # the 200 deep files were never visited
    assert asyncio.run(call(ws, "glob", pattern="*.py"))["matches"] == ["top.py"]
    assert asyncio.run(call(ws, "glob", pattern="src/*.py"))["matches"] == ["src/one.py"]
    assert asyncio.run(call(ws, "glob", pattern="*/*/*/*/f7.py"))["matches"] == ["src/a/b/c/f7.py"]
    assert len(asyncio.run(call(ws, "glob", pattern="**/*.py"))["matches"]) == 202
    found = asyncio.run(call(ws, "grep", pattern="x", glob="src/*.py"))
    assert [m["path"] for m in found["matches"]] == ["src/one.py"]
    found = asyncio.run(call(ws, "grep", pattern="x", glob="*.py"))
    assert len(found["matches"]) == 202  # a bare glob matches at any depth, as rg -g


# --- a file changed by something else while a patch is applied ----------------------


def _plan(ws: Path, patch: str) -> Any:
    from codemode.tools.patch.parser import parse_patch
    from codemode.tools.patch.plan import make_plan
    from codemode.tools.store.disk import DiskStore

    ctx = ToolContext(workspace=ws)
    store = DiskStore(ctx)
    return store, make_plan(parse_patch(patch)[0], ws, ctx, store)


@pytest.mark.parametrize("change", ["rewrite", "remove", "create"])
def test_a_file_changed_between_plan_and_commit_is_not_overwritten(ws: Path, change: str) -> None:
    # The planner and the commit are the real ones, run one after the other as
    # apply_patch does; between them the test does what a concurrent shell would.
    from codemode.tools.store.commit import CommitFailed

    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n"
        "*** Update File: b.txt\n@@\n-bee\n+BEE\n*** Add File: c.txt\n+sea\n*** End Patch\n"
    )
    store, plan = _plan(ws, patch)
    if change == "rewrite":
        (ws / "b.txt").write_text("bee, and the shell's line\n")
    elif change == "remove":
        (ws / "b.txt").unlink()
    else:
        (ws / "c.txt").write_text("the shell's file\n")
    # was: b.txt (or c.txt) overwritten with content computed from what it held before
    with pytest.raises(CommitFailed) as info:
        store.commit(plan.removals, plan.writes, plan.originals)
    assert "by something else" in str(info.value) and "restored" in str(info.value)
    assert (ws / "a.txt").read_text() == "one\n"  # the write before it was undone
    if change == "rewrite":
        assert (ws / "b.txt").read_text() == "bee, and the shell's line\n"
    elif change == "remove":
        assert not (ws / "b.txt").exists()
    else:
        assert (ws / "c.txt").read_text() == "the shell's file\n"
        assert (ws / "b.txt").read_text() == "bee\n"


def test_a_patch_over_unchanged_files_still_commits(ws: Path) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "gone.txt").write_text("x\n")
    os.symlink("a.txt", ws / "link")
    store, plan = _plan(
        ws,
        "*** Begin Patch\n*** Update File: link\n@@\n-one\n+two\n"
        "*** Delete File: gone.txt\n*** Add File: new.txt\n+n\n*** End Patch\n",
    )
    store.commit(plan.removals, plan.writes, plan.originals)
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "link").is_symlink()
    assert not (ws / "gone.txt").exists() and (ws / "new.txt").read_text() == "n\n"


async def test_an_edit_is_made_on_what_the_file_holds_when_it_is_written(tmp_path: Path) -> None:
    # The approval question stands between an edit's check and its write; a shell
    # appends to the file while the user decides. was: the edit wrote the text it had
    # computed from the file before, and the appended line was lost.
    from codemode.sandbox.session import SandboxSession

    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "notes.txt"
    target.write_text("alpha\nbeta\n")

    async def approver(request: Any) -> str:
        with open(target, "a") as f:  # what a concurrent shell would do
            f.write("gamma\n")
        return "once"

    settings = {"sandbox_mode": "workspace-write", "approval_policy": "on-request"}
    ctx = ToolContext(workspace=ws, sandbox=SandboxSession(ws, settings, approver=approver))
    args = {"path": str(target), "old_string": "beta", "new_string": "BETA"}
    result = await registry().invoke("edit", args, ctx)
    assert result["replacements"] == 1
    assert target.read_text() == "alpha\nBETA\ngamma\n"

    # Meanwhile the text to replace went away: the edit is refused, nothing written.
    async def removes(request: Any) -> str:
        target.write_text("rewritten\n")
        return "once"

    ctx = ToolContext(workspace=ws, sandbox=SandboxSession(ws, settings, approver=removes))
    with pytest.raises(ToolError, match="old_string was not found"):
        await registry().invoke("edit", args | {"old_string": "alpha"}, ctx)
    assert target.read_text() == "rewritten\n"


# A child reads a 20 MB file of empty lines (and renders it as the classic dialect
# does) with its address space capped a little above what it uses before the read.
READ_CHILD = """
import asyncio, resource, sys
from pathlib import Path
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext
from codemode.tools.read_file import READ_FILE

ws = Path(sys.argv[1])
reg = builtin_registry()
ctx = ToolContext(workspace=ws)

async def main():
    await reg.invoke("read_file", {"path": "small.txt"}, ctx)  # threads, imports: warm
    with open("/proc/self/status") as status:
        vm = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    headroom = int(sys.argv[2]) << 20
    resource.setrlimit(resource.RLIMIT_AS, (vm * 1024 + headroom, resource.RLIM_INFINITY))
    value = await reg.invoke("read_file", {"path": "nl.txt"}, ctx)
    window = await reg.invoke("read_file", {"path": "nl.txt", "offset": 10**7, "limit": 3}, ctx)
    text = READ_FILE.text(value)
    print(value["total_lines"], len(value["content"]), window["content"] == "\\n" * 3, len(text))

asyncio.run(main())
"""


def test_reading_a_file_of_millions_of_lines_costs_memory_by_its_size(ws: Path) -> None:
    # was: a list of one string per line, twice (the window, then the rendered text):
    # ~520 MB of peak memory for a 20 MB file of empty lines
    from codemode.tools.store import MAX_READ_BYTES

    size = MAX_READ_BYTES - 10
    (ws / "small.txt").write_text("x\n")
    (ws / "nl.txt").write_text("\n" * size)
    # The file's text, its window copied out, its JSON-able result: a few times 20 MB.
    proc = subprocess.run(
        [sys.executable, "-c", READ_CHILD, str(ws), "200"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    total, length, window_ok, text_length = proc.stdout.split()
    assert int(total) == size and int(length) == size and window_ok == "True"
    assert int(text_length) < 110_000


# --- the same attacks from an unprivileged user --------------------------------------

UNPRIVILEGED_CHILD = """
import asyncio, json, os, sys
from pathlib import Path
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError

ws = Path(sys.argv[1])
(ws / "a.txt").write_text("needle\\n")
(ws / "sub").mkdir()
(ws / "sub" / "b.txt").write_text("needle\\n")
os.mkfifo(ws / "sub" / ".gitignore")
os.mkdir(ws / ".git")
reg, ctx = builtin_registry(), ToolContext(workspace=ws)

async def refused(tool, **args):
    try:
        await reg.invoke(tool, args, ctx)
    except ToolError as exc:
        return str(exc)
    return "written"

async def main():
    found = await reg.invoke("grep", {"pattern": "needle"}, ctx)
    out = {
        "uid": os.getuid(),
        "grep": [m["path"] for m in found["matches"]],
        "newline": await refused("write_file", path="x\\ny", content="x"),
        "case": await refused("write_file", path=".GIT/hooks/pre-commit", content="x"),
        "patch": await refused(
            "apply_patch", input="*** Begin Patch\\n*** Add File: e\\x1bf\\n+x\\n*** End Patch\\n"
        ),
        "environ": await refused("read_file", path="/proc/self/environ"),
    }
    print(json.dumps(out))

asyncio.run(main())
"""


def test_the_attacks_fail_the_same_for_an_unprivileged_user() -> None:
    import json
    import shutil
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged user (uid 65534)")
    # Not under pytest's tmp_path: its parents are private to root.
    top = Path(tempfile.mkdtemp(prefix="codemode-attacks-"))
    os.chmod(top, 0o755)
    ws = top / "ws"
    ws.mkdir()
    os.chown(ws, 65534, 65534)
    try:
        proc = subprocess.run(
            [
                *("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
                *(sys.executable, "-c", UNPRIVILEGED_CHILD, str(ws)),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(top)},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout)
        assert out["uid"] == 65534
        assert out["grep"] == ["a.txt", "sub/b.txt"]
        assert "a newline (U+000A)" in out["newline"]
        assert "read-only" in out["case"]
        assert "an escape character (U+001B)" in out["patch"]
        assert "refusing to read" in out["environ"]
        assert sorted(os.listdir(ws)) == [".git", "a.txt", "sub"]
    finally:
        shutil.rmtree(top, ignore_errors=True)


# --- set-id bits ------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["write_file", "apply_patch"])
def test_a_rewritten_set_id_file_does_not_keep_its_set_id_bits(ws: Path, tool: str) -> None:
    """The file tools write on the host, as the user (as root: root's files): new bytes
    under a set-user-ID bit would be a set-id program with the model's content. The
    permission bits stay, the set-id ones go (as the kernel drops them on a write)."""
    target = ws / "tool"
    target.write_text("old\n")
    os.chmod(target, 0o6755)
    if tool == "write_file":
        asyncio.run(call(ws, "write_file", path="tool", content="#!/bin/sh\necho new\n"))
    else:
        patch = "*** Begin Patch\n*** Update File: tool\n@@\n-old\n+new\n*** End Patch\n"
        asyncio.run(call(ws, "apply_patch", input=patch))
    assert "new" in target.read_text()
    assert target.stat().st_mode & 0o7777 == 0o755
