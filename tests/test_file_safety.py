"""The file tools against a hostile workspace: symlink races, /undo through a swapped
folder, devices, FIFOs, sockets, huge files, pathological regexes, and bytes that are
not UTF-8. Every attack is real: a shell flipping a symlink, a FIFO nobody writes, a
socket bound in the workspace."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.sandbox.session import SandboxSession
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.dry_run import DryRun
from codemode.tools.edit import EDIT
from codemode.tui.snapshots import Snapshots

INTERPRETER = Path(sys.executable).parent / "interpreter"


def _registry() -> Any:
    registry = builtin_registry()
    registry.add(EDIT)
    return registry


async def call(ctx: ToolContext, name: str, **args: Any) -> Any:
    return await _registry().invoke(name, args, ctx)


async def call_error(ctx: ToolContext, name: str, **args: Any) -> str:
    with pytest.raises(ToolError) as info:
        await _registry().invoke(name, args, ctx)
    return str(info.value)


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


# --- races: a shell flips a folder between a directory and a symlink out ---------------

# A directory is renamed away (its files stay in the workspace) and a symlink to the
# outside put in its place, then the link becomes a directory again, as fast as bash goes.
FLIPPER = """
cd "$1"
mkdir -p d
n=0
while [ ! -e stop ]; do
  if [ -L d ]; then rm -f d; mkdir d 2>/dev/null
  else mv -T d "old.$n" 2>/dev/null; ln -s "$2" d 2>/dev/null; fi
  n=$((n+1))
done
echo $n > flips
"""


class Flipper:
    """A real bash process swapping ``ws/d`` for a symlink to ``outside`` in a loop."""

    def __init__(self, ws: Path, outside: Path) -> None:
        self.ws = ws
        self.proc = subprocess.Popen(["bash", "-c", FLIPPER, "flip", str(ws), str(outside)])
        deadline = time.monotonic() + 10
        while not (ws / "d").is_symlink() and time.monotonic() < deadline:
            time.sleep(0.001)

    def stop(self) -> int:
        (self.ws / "stop").touch()
        self.proc.wait(timeout=30)
        return int((self.ws / "flips").read_text())


def _outside_files(outside: Path) -> list[str]:
    return sorted(p.name for p in outside.rglob("*"))


def _attack(
    ws: Path, outside: Path, tool: str, make_args: Any, seconds: float
) -> tuple[int, int, int]:
    """Call ``tool`` over and over for ``seconds`` while the folder flips; returns how
    many calls succeeded, how many were refused, and how many flips the shell made."""

    async def go() -> tuple[int, int]:
        ctx = ToolContext(workspace=ws)
        ok = refused = 0
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            i += 1
            try:
                await _registry().invoke(tool, make_args(i), ctx)
                ok += 1
            except ToolError:
                refused += 1
        return ok, refused

    flipper = Flipper(ws, outside)
    try:
        ok, refused = asyncio.run(go())
    finally:
        flips = flipper.stop()
    return ok, refused, flips


@pytest.mark.parametrize("tool", ["write_file", "apply_patch", "edit"])
def test_symlink_flipping_race_writes_nothing_outside(ws: Path, outside: Path, tool: str) -> None:
    def args(i: int) -> Any:
        if tool == "write_file":
            return {"path": f"d/f{i}.txt", "content": "x\n"}
        if tool == "edit":
            return {"path": f"d/e{i}.txt", "old_string": "", "new_string": "x\n"}
        return {"input": f"*** Begin Patch\n*** Add File: d/p{i}.txt\n+x\n*** End Patch\n"}

    ok, refused, flips = _attack(ws, outside, tool, args, 3.0)
    assert _outside_files(outside) == []
    # The attack was live: the folder flipped while the tool wrote, and both states were seen.
    assert flips > 20
    assert ok > 0 and refused > 0, (ok, refused)


def test_race_on_update_delete_and_move_leaves_outside_decoys_alone(
    ws: Path, outside: Path
) -> None:
    for name in ("t.txt", "gone.txt", "m.txt"):
        (outside / name).write_text("decoy\n")

    def args(i: int) -> Any:
        # Each patch updates, deletes and moves files in d/, creating them first.
        return {
            "input": (
                "*** Begin Patch\n"
                "*** Add File: d/t.txt\n+decoy\n"
                "*** Update File: d/t.txt\n@@\n-decoy\n+changed\n"
                "*** Add File: d/gone.txt\n+decoy\n"
                "*** Delete File: d/gone.txt\n"
                "*** Add File: d/m.txt\n+decoy\n"
                f"*** Update File: d/m.txt\n*** Move to: d/moved{i}.txt\n@@\n-decoy\n+moved\n"
                "*** End Patch\n"
            )
        }

    ok, refused, flips = _attack(ws, outside, "apply_patch", args, 3.0)
    assert _outside_files(outside) == ["gone.txt", "m.txt", "t.txt"]
    for name in ("t.txt", "gone.txt", "m.txt"):
        assert (outside / name).read_text() == "decoy\n"
    assert flips > 20 and ok > 0 and refused > 0, (flips, ok, refused)


def test_race_on_edit_leaves_an_outside_decoy_alone(ws: Path, outside: Path) -> None:
    (outside / "t.txt").write_text("decoy\n")

    def args(i: int) -> Any:
        # Read through the link (reads may look outside), written back inside or refused.
        return {"path": "d/t.txt", "old_string": "decoy", "new_string": f"changed {i}"}

    ok, refused, flips = _attack(ws, outside, "edit", args, 2.0)
    assert _outside_files(outside) == ["t.txt"]
    assert (outside / "t.txt").read_text() == "decoy\n"
    assert flips > 20 and refused > 0, (flips, ok, refused)


def test_symlink_inside_the_workspace_is_still_written_through(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to("real")
    (ws / "real" / "f.txt").write_text("old\n")
    (ws / "link.txt").symlink_to("real/f.txt")
    ctx = ToolContext(workspace=ws)
    asyncio.run(call(ctx, "write_file", path="alias/g.txt", content="g\n"))
    asyncio.run(call(ctx, "write_file", path="link.txt", content="new\n"))
    assert (ws / "real" / "g.txt").read_text() == "g\n"
    assert (ws / "link.txt").is_symlink() and (ws / "real" / "f.txt").read_text() == "new\n"


def test_protected_folders_at_any_depth(ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "hooks").symlink_to(ws / ".git" / "hooks")
    (ws / ".git" / "hooks").mkdir(parents=True)
    ctx = ToolContext(workspace=ws)
    for path in (
        "sub/.codemode/rules/x.rules",
        "sub/.git/config",
        ".git/config",
        "hooks/pre-commit",
    ):
        message = asyncio.run(call_error(ctx, "write_file", path=path, content="x"))
        assert "read-only" in message, (path, message)
        patch = f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n"
        message = asyncio.run(call_error(ctx, "apply_patch", input=patch))
        assert "read-only" in message, (path, message)
        # A dry run shows only what a real run could write.
        dry = ToolContext(workspace=ws, dry_run=DryRun())
        for tool, args in (
            ("apply_patch", {"input": patch}),
            ("write_file", {"path": path, "content": "x"}),
        ):
            assert "read-only" in asyncio.run(call_error(dry, tool, **args)), (tool, path)
    assert not (ws / "sub" / ".codemode").exists() and not (ws / "sub" / ".git").exists()
    assert list((ws / ".git" / "hooks").iterdir()) == []


# --- /undo through a folder swapped for a symlink --------------------------------------


def test_undo_never_writes_through_a_swapped_folder(ws: Path, outside: Path) -> None:
    snaps = Snapshots(ws)
    try:
        snaps.begin_turn()
        (ws / "keys").mkdir()
        (ws / "keys" / "authorized_keys").write_text("ssh-ed25519 AAAA model\n")
        snaps.end_turn()
        # Turn 2: the folder becomes a link to a directory outside (~/.ssh in the attack).
        snaps.begin_turn()
        (ws / "keys" / "authorized_keys").unlink()
        (ws / "keys").rmdir()
        (ws / "keys").symlink_to(outside)
        changes = snaps.end_turn()
        assert changes is not None and "keys/authorized_keys" in changes.before
        result = snaps.undo()
        assert result is not None
        assert _outside_files(outside) == []
        assert result.restored == [] and len(result.failed) == 1
        assert "keys" in result.failed[0] and "symlink" in result.failed[0]
        # Undoing turn 1 removes what it created; the link (not its target) stays.
        (ws / "keys").unlink()
        (ws / "keys").mkdir()
        (ws / "keys" / "authorized_keys").write_text("ssh-ed25519 AAAA model\n")
        result = snaps.undo()
        assert result is not None and result.removed == ["keys/authorized_keys"]
    finally:
        snaps.close()


def test_undo_restores_a_file_swapped_for_a_symlink(ws: Path, outside: Path) -> None:
    (ws / "f.txt").write_text("mine\n")
    (outside / "target").write_text("outside\n")
    snaps = Snapshots(ws)
    try:
        snaps.begin_turn()
        (ws / "f.txt").unlink()
        (ws / "f.txt").symlink_to(outside / "target")
        snaps.end_turn()
        result = snaps.undo()
        assert result is not None and result.restored == ["f.txt"]
        assert not (ws / "f.txt").is_symlink() and (ws / "f.txt").read_text() == "mine\n"
        assert (outside / "target").read_text() == "outside\n"
    finally:
        snaps.close()


# --- what read_file, grep and glob refuse ----------------------------------------------


def test_non_regular_files_are_refused_naming_what_they_are(ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    ctx = ToolContext(workspace=ws)
    try:
        cases = {"/dev/zero": "character device", "fifo": "FIFO", "sock": "socket"}
        for path, kind in cases.items():
            started = time.monotonic()
            message = asyncio.run(call_error(ctx, "read_file", path=path))
            assert kind in message and "not a regular file" in message, message
            assert time.monotonic() - started < 5
            message = asyncio.run(call_error(ctx, "grep", pattern="x", path=path))
            assert kind in message, message
            message = asyncio.run(call_error(ctx, "glob", pattern="*", path=path))
            assert kind in message, message
        (ws / "a.txt").write_text("x\n")
        # A walk passes over them instead of hanging on the FIFO.
        found = asyncio.run(call(ctx, "grep", pattern="x"))
        assert [m["path"] for m in found["matches"]] == ["a.txt"]
        assert asyncio.run(call(ctx, "glob", pattern="*"))["matches"] == ["a.txt"]
        # Nor can the FIFO be written into (it would block) or replaced unasked.
        message = asyncio.run(call_error(ctx, "write_file", path="fifo", content="x"))
        assert "FIFO" in message
    finally:
        sock.close()


def test_reads_stop_at_the_byte_cap(ws: Path) -> None:
    from codemode.tools.store import MAX_READ_BYTES

    with open(ws / "big.txt", "wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: costs no disk
    ctx = ToolContext(workspace=ws)
    assert "byte limit" in asyncio.run(call_error(ctx, "read_file", path="big.txt"))


def test_the_agent_process_environment_is_not_readable(ws: Path) -> None:
    ctx = ToolContext(workspace=ws)
    for path in ("/proc/self/environ", f"/proc/{os.getpid()}/environ", "/proc/thread-self/environ"):
        message = asyncio.run(call_error(ctx, "read_file", path=path))
        assert "refusing to read" in message, message


def test_pathological_regex_returns_promptly(ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 200_000 + "b\n" + "a" * 30 + "\n")
    ctx = ToolContext(workspace=ws)
    started = time.monotonic()
    found = asyncio.run(call(ctx, "grep", pattern="^(a+)+$"))
    elapsed = time.monotonic() - started
    assert [m["line"] for m in found["matches"]] == [2]
    # Python's re takes minutes on the 30-character line alone; RE2 is linear.
    assert elapsed < 5, elapsed
    message = asyncio.run(call_error(ctx, "grep", pattern="(?<=a)b"))
    assert "RE2" in message and "lookaround" in message


def test_grep_keeps_line_semantics(ws: Path) -> None:
    (ws / "a.txt").write_bytes(b"one\r\ntwo x\r\n\r\nthree\n")
    (ws / "b.txt").write_text("")
    ctx = ToolContext(workspace=ws)
    found = asyncio.run(call(ctx, "grep", pattern="x$"))
    assert [(m["line"], m["text"]) for m in found["matches"]] == [(2, "two x")]
    found = asyncio.run(call(ctx, "grep", pattern="^$", path="a.txt"))
    assert [m["line"] for m in found["matches"]] == [3]
    found = asyncio.run(call(ctx, "grep", pattern="o\\stwo"))
    assert found["matches"] == []  # a match never spans lines
    found = asyncio.run(call(ctx, "grep", pattern="THREE", case_insensitive=True))
    assert [m["line"] for m in found["matches"]] == [4]


def test_fifo_and_slow_grep_stop_at_the_program_time_limit(ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    (ws / "big.txt").write_text(("x" * 99 + "\n") * 100_000)
    script = ws / "s.js"
    script.write_text(
        "try { await tools.read_file({path: 'fifo'}) } catch (e) { console.log(e.message) }\n"
        "while (true) await tools.grep({pattern: 'y', path: '.'})\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [str(INTERPRETER), "run", "--timeout", "2", str(script)],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert "FIFO" in proc.stdout
    assert elapsed < 20, elapsed


# --- a refusal names what refused it ---------------------------------------------------


def test_read_only_refusals_name_the_mode(ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    ctx = ToolContext(workspace=ws, sandbox=SandboxSession(ws, {"sandbox_mode": "read-only"}))
    patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n-a\n+b\n*** End Patch\n"
    for tool, args in (
        ("apply_patch", {"input": patch}),
        ("write_file", {"path": "f.txt", "content": "b\n"}),
        ("edit", {"path": "f.txt", "old_string": "a", "new_string": "b"}),
    ):
        message = asyncio.run(call_error(ctx, tool, **args))
        assert "read-only" in message and "outside" not in message, message
    assert (ws / "f.txt").read_text() == "a\n"


def test_read_only_refusal_through_the_cli(ws: Path, tmp_path: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    script = ws / "s.js"
    script.write_text(
        "try { await tools.apply_patch('*** Begin Patch\\n*** Add File: n.txt\\n+x\\n"
        "*** End Patch\\n') } catch (e) { console.log(e.message) }"
    )
    env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [str(INTERPRETER), "run", "--sandbox", "read-only", str(script)],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "read-only" in proc.stdout and "outside the workspace" not in proc.stdout
    assert not (ws / "n.txt").exists()


# --- bytes that are not UTF-8 survive -------------------------------------------------


def test_latin1_round_trips_through_read_edit_and_write(ws: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    ctx = ToolContext(workspace=ws)
    read = asyncio.run(call(ctx, "read_file", path="latin.txt"))
    assert read["content"] == "caf\u00e9\n" and read["encoding"] == "latin-1"
    asyncio.run(call(ctx, "write_file", path="latin.txt", content="# header\n" + read["content"]))
    assert (ws / "latin.txt").read_bytes() == b"# header\ncaf\xe9\n"
    asyncio.run(call(ctx, "edit", path="latin.txt", old_string="header", new_string="t\u00eate"))
    assert (ws / "latin.txt").read_bytes() == b"# t\xeate\ncaf\xe9\n"
    found = asyncio.run(call(ctx, "grep", pattern="caf\u00e9"))
    assert found["matches"][0]["text"] == "caf\u00e9" and found["latin1_files"] == ["latin.txt"]
    # What Latin-1 cannot hold is refused, naming the encoding; nothing changes.
    message = asyncio.run(
        call_error(ctx, "edit", path="latin.txt", old_string="caf", new_string="\u2014")
    )
    assert "Latin-1" in message
    assert (ws / "latin.txt").read_bytes() == b"# t\xeate\ncaf\xe9\n"
    # Converting is explicit.
    asyncio.run(call(ctx, "write_file", path="latin.txt", content="\u2014\n", encoding="utf-8"))
    assert (ws / "latin.txt").read_bytes() == "\u2014\n".encode()


def test_replacement_character_is_not_written_back(ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"caf\xc3\xa9\n")
    ctx = ToolContext(workspace=ws)
    message = asyncio.run(call_error(ctx, "write_file", path="f.txt", content="caf\ufffd\n"))
    assert "U+FFFD" in message
    assert (ws / "f.txt").read_bytes() == b"caf\xc3\xa9\n"
    # A new file may hold it, and so may one that already did.
    asyncio.run(call(ctx, "write_file", path="g.txt", content="\ufffd\n"))
    asyncio.run(call(ctx, "write_file", path="g.txt", content="x\ufffd\n"))
    assert (ws / "g.txt").read_text() == "x\ufffd\n"


def test_latin1_round_trips_in_a_code_mode_script(ws: Path, tmp_path: Path) -> None:
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    script = ws / "s.js"
    script.write_text(
        "const r = await tools.read_file({path: 'latin.txt'})\n"
        "await tools.write_file({path: 'latin.txt', content: '// header\\n' + r.content})\n"
        "const g = await tools.grep({pattern: 'caf.$'})\n"
        "return [r.encoding, g.matches[0].text]\n"
    )
    env = {**os.environ, "CODEMODE_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [str(INTERPRETER), "run", "--json", str(script)],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    value = json.loads(proc.stdout)["value"]
    assert value == ["latin-1", "caf\u00e9"]
    assert (ws / "latin.txt").read_bytes() == b"// header\ncaf\xe9\n"


def test_latin1_round_trips_through_classic_tool_calls(home: Path, ws: Path) -> None:
    from agent_support import call as scripted_call
    from agent_support import provider_flags, run_cli

    from codemode_testkit.scripted_server import ScriptedModelServer

    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    # The model writes back what it read (as it saw it in the tool result), plus a header.
    script = [
        {"tool_calls": [scripted_call("read_file", {"path": "latin.txt"})]},
        {
            "tool_calls": [
                scripted_call("write_file", {"path": "latin.txt", "content": "# h\ncaf\u00e9\n"})
            ]
        },
        {"text": "done"},
    ]
    with ScriptedModelServer(script) as server:
        run = run_cli(
            ["exec", *provider_flags(server.base_url, "chat"), "add a header"], home=home, cwd=ws
        )
    assert run.code == 0, run.stderr
    seen = json.dumps(server.requests[1].body, ensure_ascii=False)
    assert "caf\u00e9" in seen and "latin-1" in seen and "\ufffd" not in seen
    assert (ws / "latin.txt").read_bytes() == b"# h\ncaf\xe9\n"


UNPRIVILEGED_RACE = """
import asyncio, json, subprocess, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from test_file_safety import FLIPPER
from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError

ws, outside = Path(sys.argv[1]), Path(sys.argv[2])
flipper = subprocess.Popen(["bash", "-c", FLIPPER, "flip", str(ws), str(outside)])
deadline = time.monotonic() + 10
while not (ws / "d").is_symlink():
    assert time.monotonic() < deadline, "the flipper did not start"
    time.sleep(0.001)

async def go():
    ctx, registry, ok, refused = ToolContext(workspace=ws), builtin_registry(), 0, 0
    deadline, i = time.monotonic() + 3, 0
    while time.monotonic() < deadline:
        i += 1
        try:
            await registry.invoke("write_file", {"path": f"d/f{i}", "content": "x"}, ctx)
            ok += 1
        except ToolError:
            refused += 1
    return ok, refused

ok, refused = asyncio.run(go())
(ws / "stop").touch()
flipper.wait()
print(json.dumps({"ok": ok, "refused": refused, "flips": int((ws / "flips").read_text())}))
"""


def test_symlink_race_as_an_unprivileged_user() -> None:
    import shutil
    import tempfile

    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to an unprivileged user (uid 65534)")
    # Not under pytest's tmp_path: its parents are private to root.
    tmp_path = Path(tempfile.mkdtemp(prefix="codemode-race-"))
    os.chmod(tmp_path, 0o755)
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    for d in (ws, outside):
        d.mkdir()
        os.chown(d, 65534, 65534)
    try:
        _unprivileged_race(tmp_path, ws, outside)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _unprivileged_race(tmp_path: Path, ws: Path, outside: Path) -> None:
    proc = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-c",
            UNPRIVILEGED_RACE,
            str(ws),
            str(outside),
            str(Path(__file__).parent),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout)
    assert _outside_files(outside) == []
    assert counts["flips"] > 20 and counts["ok"] > 0 and counts["refused"] > 0, counts


def test_relative_links_with_dotdot_and_deep_paths(ws: Path, outside: Path) -> None:
    (ws / "real").mkdir()
    (ws / "sub").mkdir()
    (ws / "sub" / "up").symlink_to("../real")  # climbs, but stays inside
    (ws / "sub" / "out").symlink_to("../../outside")  # climbs out of the root
    ctx = ToolContext(workspace=ws)
    asyncio.run(call(ctx, "write_file", path="sub/up/f.txt", content="f\n"))
    assert (ws / "real" / "f.txt").read_text() == "f\n"
    message = asyncio.run(call_error(ctx, "write_file", path="sub/out/f.txt", content="x"))
    assert "outside" in message and _outside_files(outside) == []
    # A deep path holds one descriptor at a time, not one per level.
    deep = "/".join(["d"] * 300) + "/f.txt"
    before = len(os.listdir("/proc/self/fd"))
    asyncio.run(call(ctx, "write_file", path=deep, content="deep\n"))
    assert (ws / deep).read_text() == "deep\n"
    assert asyncio.run(call(ctx, "read_file", path=deep))["content"] == "deep\n"
    assert len(os.listdir("/proc/self/fd")) <= before + 2


def test_pathological_glob_returns_promptly(ws: Path) -> None:
    (ws / ("a" * 60)).write_text("x\n")
    ctx = ToolContext(workspace=ws)
    started = time.monotonic()
    found = asyncio.run(call(ctx, "glob", pattern="*a*a*a*a*a*a*a*a*a*a*a*c"))
    assert found["matches"] == []
    found = asyncio.run(call(ctx, "grep", pattern="x", glob="*a*a*a*a*a*a*a*a*a*a*a*c"))
    assert found["matches"] == []
    # Python's re took 84 s on a 40-character name for this glob.
    assert time.monotonic() - started < 5


def test_pathological_gitignore_line_does_not_stall_a_walk(ws: Path) -> None:
    (ws / ".gitignore").write_text("*a*a*a*a*a*a*a*a*a*a*a*c\n*.log\n")
    (ws / ("a" * 60)).write_text("x\n")
    (ws / "skip.log").write_text("x\n")
    ctx = ToolContext(workspace=ws)
    started = time.monotonic()
    found = asyncio.run(call(ctx, "grep", pattern="x"))
    assert [m["path"] for m in found["matches"]] == ["a" * 60]  # *.log still ignored
    assert time.monotonic() - started < 5


def test_a_tree_deeper_than_the_recursion_limit_is_walked(ws: Path) -> None:
    # A hostile repository 1500 folders deep made glob and grep fail (RecursionError).
    # A hundred levels past Python's recursion limit fail a recursive walk as surely.
    # (What such a walk costs: tests/test_deep_tree_search.py.)
    depth = sys.getrecursionlimit() + 100
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"needle\n")
        os.close(leaf)
    finally:
        os.close(fd)
    try:
        (ws / "top.txt").write_text("needle\n")
        ctx = ToolContext(workspace=ws)
        deep = "/".join(["d"] * depth) + "/f.txt"
        found = asyncio.run(call(ctx, "glob", pattern="**/*.txt"))
        assert found["matches"] == [deep, "top.txt"]
        found = asyncio.run(call(ctx, "grep", pattern="needle"))
        assert [m["path"] for m in found["matches"]] == [deep, "top.txt"]
    finally:
        # pytest's own clean-up of old temporary folders recurses, and would fail on it
        subprocess.run(["rm", "-rf", "--one-file-system", str(ws / "d")], check=True)


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "a\0b", "content": "x"}),
        ("read_file", {"path": "a\0b"}),
        ("edit", {"path": "a\0b", "old_string": "a", "new_string": "b"}),
        ("list_dir", {"path": "a\0b"}),
        ("grep", {"pattern": "x", "path": "a\0b"}),
    ],
)
def test_a_path_with_a_nul_is_refused_clearly(ws: Path, tool: str, args: dict[str, str]) -> None:
    # was "tools.write_file failed: ValueError: embedded null byte"
    message = asyncio.run(call_error(ToolContext(workspace=ws), tool, **args))
    assert "NUL character" in message and "ValueError" not in message
    assert os.listdir(ws) == []
