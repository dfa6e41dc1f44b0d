"""kill -9 mid-patch, then *another* entry point starts in that workspace: it rolls the
interrupted write back before it does anything else (its program reads the whole
"before"), leaves no temporary file and no journal, and says so (crash consistency:
docs/file-store.md).

The patch is stopped by a real SIGKILL of the real entry point's process, between its
two files: ``sitecustomize.py`` (put on the killed process's PYTHONPATH) kills the
process just before the file named by ``CODEMODE_TEST_KILL_BEFORE`` is renamed into
place, so the first file is already patched, the second is not and its temporary file
lies beside it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agent_support import INTERPRETER, call, cli_env, provider_flags, run_cli

from codemode_testkit.scripted_server import ScriptedModelServer

PATCH = """*** Begin Patch
*** Update File: a.txt
@@
-alpha
+ALPHA
*** Update File: b.txt
@@
-beta
+BETA
*** End Patch
"""
BEFORE = {"a.txt": b"alpha\n", "b.txt": b"beta\n"}
KILLED = {"a.txt": b"ALPHA\n", "b.txt": b"beta\n"}  # between: the first file only
RECOVERED = "rolled back an interrupted write"
# A program that reads both files, as the first thing a next entry point runs.
READ_BOTH = (
    "return (await tools.read_file({path: 'a.txt'})).content"
    " + (await tools.read_file({path: 'b.txt'})).content"
)
READ_BACK = "alpha\nbeta\n"

SITECUSTOMIZE = """
import os, signal
_names = set(filter(None, os.environ.get("CODEMODE_TEST_KILL_BEFORE", "").split(",")))
if _names:
    def _stop(real):
        def wrapped(src, dst, *a, **k):
            if os.path.basename(os.fsdecode(dst)) in _names:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(src, dst, *a, **k)
        return wrapped
    os.rename = _stop(os.rename)
    os.replace = _stop(os.replace)
"""


def files(ws: Path) -> dict[str, bytes]:
    """Every file in the workspace but the repository marker."""
    return {
        p.relative_to(ws).as_posix(): p.read_bytes()
        for p in sorted(ws.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(ws).parts
    }


def journals(home: Path) -> list[str]:
    folder = home / "journal"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A workspace (a repository, so that batch takes it too), codemode's home, and the
    folder holding the killing ``sitecustomize``."""
    ws, home, hook = tmp_path / "ws", tmp_path / "home", tmp_path / "hook"
    (ws / ".git").mkdir(parents=True)
    for name, data in BEFORE.items():
        (ws / name).write_bytes(data)
    home.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "patch.js").write_text(f"await tools.apply_patch({{input: {json.dumps(PATCH)}}});")
    return {"ws": ws, "home": home, "hook": hook, "tmp": tmp_path}


def killing_env(place: dict[str, Path]) -> dict[str, str]:
    return cli_env(place["home"], PYTHONPATH=str(place["hook"]),
                   CODEMODE_TEST_KILL_BEFORE="b.txt")  # fmt: skip


def check_killed(place: dict[str, Path], code: int, stderr: str = "") -> None:
    """The killed entry point died of SIGKILL between the two files, a journal left."""
    ws = place["ws"]
    assert code == -signal.SIGKILL, (code, stderr[-2000:])
    left = files(ws)
    assert {k: left[k] for k in BEFORE} == KILLED, left
    assert len(left) == 3, f"no temporary file beside b.txt: {sorted(left)}"
    assert journals(place["home"]), "the killed patch left no journal"


# --- the killed side: each entry point stopped mid-patch ----------------------------------


def kill_run(place: dict[str, Path]) -> None:
    proc = subprocess.run([str(INTERPRETER), "run", str(place["tmp"] / "patch.js")],
                          cwd=place["ws"], env=killing_env(place), capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    check_killed(place, proc.returncode, proc.stderr)


HOST_PATCH = """
import asyncio, json, sys
from codemode import ToolHost
async def main():
    async with ToolHost(sys.argv[1]) as host:
        await host.execute("await tools.apply_patch({input: " + json.dumps(sys.argv[2]) + "})")
asyncio.run(main())
"""


def kill_tool_host(place: dict[str, Path]) -> None:
    proc = subprocess.run([sys.executable, "-c", HOST_PATCH, str(place["ws"]), PATCH],
                          env=killing_env(place), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    check_killed(place, proc.returncode, proc.stderr)


def kill_exec(place: dict[str, Path]) -> None:
    code = f"await tools.apply_patch({{input: {json.dumps(PATCH)}}});"
    script = [{"tool_calls": [call("exec", {"code": code})]}, {"text": "patched"}]
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            [str(INTERPRETER), "exec", "--code-mode", "--full-auto",
             *provider_flags(server.base_url, "chat"), "patch both"],
            cwd=place["ws"], env=killing_env(place), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    check_killed(place, proc.returncode, proc.stderr)


def check_recovered(place: dict[str, Path], said: str) -> None:
    assert RECOVERED in said, said[-3000:]
    assert files(place["ws"]) == BEFORE, "not the whole before, or a temporary file left"
    assert journals(place["home"]) == []


# --- the next entry point: a different one, started in the same workspace ---------------


def test_run_after_a_killed_tool_host(place: dict[str, Path]) -> None:
    kill_tool_host(place)
    (place["tmp"] / "read.js").write_text(READ_BOTH)
    done = run_cli(["run", str(place["tmp"] / "read.js")], home=place["home"], cwd=place["ws"])
    assert done.code == 0, done.stderr
    assert done.stdout == READ_BACK + "\n"  # what the program read: the whole before
    check_recovered(place, done.stderr)


def test_tool_host_after_a_killed_run(place: dict[str, Path]) -> None:
    kill_run(place)
    code = (
        "import asyncio, sys\nfrom codemode import ToolHost\n"
        "async def main():\n"
        "    async with ToolHost(sys.argv[1]) as host:\n"
        f"        print((await host.execute({READ_BOTH!r})).value, end='')\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(place["ws"])], capture_output=True,
                          text=True, env=cli_env(place["home"]), timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == READ_BACK
    check_recovered(place, done.stderr)


async def mcp_execute(place: dict[str, Path], code: str, env: dict[str, str]) -> Any:
    """One ``execute`` call to `interpreter mcp-server` in the workspace (official
    client); its stderr goes to ``mcp.err``."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(INTERPRETER), args=["mcp-server"], cwd=place["ws"], env=env
    )
    with (place["tmp"] / "mcp.err").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            return await client.call_tool("execute", {"code": code})


def kill_mcp_server(place: dict[str, Path]) -> None:
    code = f"await tools.apply_patch({{input: {json.dumps(PATCH)}}});"
    try:
        asyncio.run(asyncio.wait_for(mcp_execute(place, code, killing_env(place)), 120))
    except Exception as exc:  # the server died under the call: how depends on the SDK
        print("the killed server's call ended with", type(exc).__name__)
    # (the client owns the process: its status is not ours to read; the state is)
    check_killed(place, -signal.SIGKILL, (place["tmp"] / "mcp.err").read_text())


def test_mcp_server_after_a_killed_exec(place: dict[str, Path]) -> None:
    kill_exec(place)
    result = asyncio.run(asyncio.wait_for(mcp_execute(place, READ_BOTH, cli_env(place["home"])),
                                          120))  # fmt: skip
    assert result.structured_content["value"] == READ_BACK, result
    check_recovered(place, (place["tmp"] / "mcp.err").read_text())


def test_exec_json_after_a_killed_run(place: dict[str, Path]) -> None:
    kill_run(place)
    script = [{"tool_calls": [call("exec", {"code": READ_BOTH})]}, {"text": "read"}]
    with ScriptedModelServer(script) as server:
        done = run_cli(["exec", "--json", "--code-mode", *provider_flags(server.base_url, "chat"),
                        "read both"], home=place["home"], cwd=place["ws"])  # fmt: skip
    assert done.code == 0, done.stderr
    events = done.events()
    said = [e for e in events if e.get("type") == "workspace.recovered"]
    assert said and RECOVERED in said[0]["message"], events[:3]
    assert events.index(said[0]) < [e["type"] for e in events].index("turn.started")
    assert json.dumps(READ_BACK)[1:-1] in done.stdout  # the program's result, in its item
    check_recovered(place, said[0]["message"])


def test_batch_after_a_killed_exec(place: dict[str, Path]) -> None:
    kill_exec(place)
    (place["tmp"] / "read.js").write_text(READ_BOTH)
    report = place["tmp"] / "r.jsonl"
    done = run_cli(["run", str(place["tmp"] / "read.js"), "--repos", str(place["ws"]),
                    "--report", str(report)], home=place["home"], cwd=place["tmp"])  # fmt: skip
    assert done.code == 0, done.stderr
    [line] = [json.loads(x) for x in report.read_text().splitlines()[1:]]
    assert line["status"] == "ok" and line["value"] == READ_BACK, line
    assert line["changed_files"] == []  # nothing of the killed patch reached the copy
    check_recovered(place, done.stderr)


class AcpClient:
    def __init__(self) -> None:
        self.notices: list[str] = []  # what the editor was told beside the conversation

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        notice = ((getattr(update, "field_meta", None) or {}).get("codemode") or {}).get("notice")
        if notice is not None:
            self.notices.append(f"{notice['kind']}: {notice['message']}")


async def acp_turn(
    place: dict[str, Path], code: str, env: dict[str, str], client: AcpClient | None = None
) -> tuple[str, int]:
    """One turn of `interpreter acp` in the workspace whose model runs ``code``: what the
    model was shown last, and the agent's exit status (its stderr goes to ``acp.err``)."""
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import ClientCapabilities

    script = [{"tool_calls": [call("exec", {"code": code})]}, {"text": "done"}]
    with ScriptedModelServer(script) as server, (place["tmp"] / "acp.err").open("w") as errlog:
        async with spawn_agent_process(
            client or AcpClient(), str(INTERPRETER), "acp", "--code-mode", "--full-auto",
            *provider_flags(server.base_url, "chat"), env=env, cwd=place["ws"],
            transport_kwargs={"stderr": errlog},
        ) as (conn, process):  # fmt: skip
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()
            )
            opened = await conn.new_session(cwd=str(place["ws"]), mcp_servers=[])
            try:
                await conn.prompt(session_id=opened.session_id, prompt=[text_block("go")])
            except Exception as exc:  # the agent died under the turn
                print("the turn ended with", type(exc).__name__)
                return "", await process.wait()
            return json.dumps(server.requests[-1].body), 0


def kill_acp(place: dict[str, Path]) -> None:
    code = f"await tools.apply_patch({{input: {json.dumps(PATCH)}}});"
    _seen, status = asyncio.run(asyncio.wait_for(acp_turn(place, code, killing_env(place)), 120))
    check_killed(place, status, (place["tmp"] / "acp.err").read_text())


def test_acp_after_a_killed_mcp_server(place: dict[str, Path]) -> None:
    kill_mcp_server(place)
    editor = AcpClient()
    seen, status = asyncio.run(
        asyncio.wait_for(acp_turn(place, READ_BOTH, cli_env(place["home"]), editor), 120)
    )
    assert status == 0
    assert "alpha" in seen and "ALPHA" not in seen  # the model was shown the whole before
    check_recovered(place, (place["tmp"] / "acp.err").read_text())
    # The editor is told too (its log has the stderr line).
    told = [n for n in editor.notices if n.startswith("workspace.recovered: ")]
    assert told and RECOVERED in told[0], editor.notices


def test_interactive_after_a_killed_acp(place: dict[str, Path]) -> None:
    from test_tui import Terminal

    kill_acp(place)
    with ScriptedModelServer([{"text": "hello"}]) as server:
        term = Terminal(provider_flags(server.base_url, "chat"), home=place["home"],
                        cwd=place["ws"])  # fmt: skip
        try:
            term.expect(RECOVERED)
            term.prompt()
            assert term.finish() == 0
        finally:
            term.child.terminate(force=True)
    check_recovered(place, RECOVERED)


def test_as_an_unprivileged_user_a_killed_tool_host_then_run(tmp_path: Path) -> None:
    """The same as uid 65534 (its own home and journal; system Python, as the
    confinement tests run it): a ToolHost killed mid-patch, then `interpreter run`."""
    from confinement_support import (
        REPO,
        SYSTEM_PYTHON,
        _as_nobody,
        _site_packages,
        give,
        nobody_unavailable,
    )

    if (why := nobody_unavailable()) is not None:
        pytest.skip(f"cannot run as nobody: {why}")
    base = Path(tempfile.mkdtemp(prefix="codemode-recover-"))
    try:
        base.chmod(0o755)
        ws, home, hook = base / "ws", base / "home", base / "hook"
        (ws / ".git").mkdir(parents=True)
        for name, data in BEFORE.items():
            (ws / name).write_bytes(data)
        home.mkdir()
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (base / "read.js").write_text(READ_BOTH)
        give(base, "nobody")
        path = f"{REPO}:{_site_packages()}"
        env = {"PATH": os.environ["PATH"], "HOME": str(base), "CODEMODE_HOME": str(home)}
        killed = subprocess.run(
            [*_as_nobody(), SYSTEM_PYTHON, "-c", HOST_PATCH, str(ws), PATCH],
            env={**env, "PYTHONPATH": f"{hook}:{path}", "CODEMODE_TEST_KILL_BEFORE": "b.txt"},
            capture_output=True, text=True, timeout=120, cwd=ws,
        )  # fmt: skip
        check_killed({"ws": ws, "home": home}, killed.returncode, killed.stderr)
        assert {(ws / "a.txt").stat().st_uid, os.stat(home / "journal").st_uid} == {65534}
        done = subprocess.run(
            [*_as_nobody(), SYSTEM_PYTHON, "-m", "codemode.cli", "run", str(base / "read.js")],
            env={**env, "PYTHONPATH": path}, capture_output=True, text=True, timeout=120, cwd=ws,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout == READ_BACK + "\n"
        check_recovered({"ws": ws, "home": home}, done.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
