"""The sandbox for real: confined subprocesses, writable roots, approvals, code mode.

Every attack here runs a real shell (or a real file tool) against real directories; a
test passes only if the attempt was refused or failed and nothing outside the workspace
changed. Confinement tests run once per backend that works on this machine; a backend
that cannot run here is skipped with the reason.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.host import ToolHost
from codemode.sandbox.approvals.approval import ApprovalRequest
from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.session import CommandRefused, SandboxSession
from codemode.sandbox.settings import SandboxSettings
from codemode.tools import ToolContext, ToolError, builtin_registry

BACKENDS = ["bubblewrap", "landlock"]
INTERPRETER = Path(sys.executable).parent / "interpreter"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "codemode-home"
    monkeypatch.setenv("CODEMODE_HOME", str(h))
    return h


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    (w / "keep.txt").write_text("workspace file\n")
    return w


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    o = tmp_path / "outside"
    o.mkdir()
    (o / "victim.txt").write_text("original\n")
    return o


def snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            out[rel] = p.read_bytes() if p.is_file() and not p.is_symlink() else "entry"
    return out


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    why = getattr(probe(), request.param)
    if why is not None:
        pytest.skip(f"{request.param} cannot run on this machine: {why}")
    return request.param


def session(ws: Path, **settings: Any) -> SandboxSession:
    approver = settings.pop("approver", None)
    return SandboxSession(ws, SandboxSettings(**settings), approver=approver)


async def shell(ctx: ToolContext, command: str, **kw: Any) -> dict[str, Any]:
    return await builtin_registry().invoke("shell", {"command": command, **kw}, ctx)


def ctx_for(ws: Path, **settings: Any) -> ToolContext:
    return ToolContext(workspace=ws, sandbox=session(ws, **settings))


# --- confinement: the shell cannot write outside the writable roots --------------------


async def test_workspace_write_allows_the_workspace_and_tmpdir(ws: Path, backend: str) -> None:
    ctx = ctx_for(ws, backend=backend, approval_policy="never")
    r = await shell(ctx, 'echo made > new.txt && cat new.txt && echo t > "$TMPDIR/t" && echo ok')
    assert r["exit_code"] == 0, r["output"]
    assert r["output"] == "made\nok\n"
    assert (ws / "new.txt").read_text() == "made\n"


@pytest.mark.parametrize(
    "attack",
    [
        "echo pwned > {o}/victim.txt",
        "echo pwned > ../outside/victim.txt",
        "ln -s {o} link; echo pwned > link/victim.txt",
        "cp keep.txt {o}/new.txt",
        "rm -f {o}/victim.txt",
        "mv {o}/victim.txt ./stolen.txt",
        "touch {o}/created",
        "mkdir {o}/dir",
        'python3 -c \'open("{o}/victim.txt", "w").write("pwned")\'',
        "cd .. && echo pwned > outside/victim.txt",
        # known escapes from other sandboxes
        "echo pwned > /proc/self/root{o}/victim.txt",
        "echo pwned > /proc/$$/root{o}/victim.txt",
        "cp /usr/bin/touch ./t && ./t {o}/created",
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/touch {o}/created",
        "env -i PATH=/usr/bin:/bin CODEMODE_SANDBOX=off touch {o}/created",
    ],
)
async def test_shell_cannot_write_outside(
    ws: Path, outside: Path, backend: str, attack: str
) -> None:
    before = snapshot(outside)
    # approval "never": nothing is refused up front, so confinement alone must hold
    ctx = ctx_for(ws, backend=backend, approval_policy="never")
    r = await shell(ctx, attack.format(o=outside))
    assert r["exit_code"] != 0, r["output"]
    assert snapshot(outside) == before


async def test_read_only_mode_refuses_every_write(ws: Path, backend: str) -> None:
    ctx = ctx_for(ws, sandbox_mode="read-only", backend=backend, approval_policy="never")
    r = await shell(ctx, "cat keep.txt; echo x > new.txt")
    assert r["exit_code"] != 0
    assert r["output"].startswith("workspace file\n")
    assert not (ws / "new.txt").exists()


async def test_protected_folders_stay_read_only_for_the_shell(ws: Path) -> None:
    if probe().bubblewrap is not None:
        pytest.skip(f"needs bubblewrap (Landlock cannot protect subfolders): {probe().bubblewrap}")
    (ws / ".git" / "hooks").mkdir(parents=True)
    ctx = ctx_for(ws, backend="bubblewrap", approval_policy="never")
    for attack in [
        "echo 'rm -rf ~' > .git/hooks/pre-commit",
        "mkdir -p .codemode/rules && echo 'prefix_rule(pattern=[1])' > .codemode/rules/x.rules",
        "mv .git/hooks .git/old-hooks",
    ]:
        r = await shell(ctx, attack)
        assert r["exit_code"] != 0, (attack, r["output"])
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws / ".codemode" / "rules").exists()
    assert (ws / ".git" / "hooks").is_dir()
    # all of .git is read-only (git add/commit run outside codemode); the work tree is not
    r = await shell(ctx, "echo fine > .git/description")
    assert r["exit_code"] != 0 and "the whole .git is read-only" in r["output"], r["output"]
    r = await shell(ctx, "echo fine > work.txt && cat work.txt")
    assert r["output"] == "fine\n"


async def test_extra_writable_roots(ws: Path, outside: Path, backend: str) -> None:
    ctx = ctx_for(ws, backend=backend, approval_policy="never", writable_roots=[outside])
    r = await shell(ctx, f"echo allowed > {outside}/victim.txt")
    assert r["exit_code"] == 0, r["output"]
    assert (outside / "victim.txt").read_text() == "allowed\n"


# --- network ---------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    yield srv
    srv.close()


def accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


CONNECT = "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"


async def test_restricted_shell_cannot_reach_a_local_listener(
    ws: Path, backend: str, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    ctx = ctx_for(ws, backend=backend, approval_policy="never")
    r = await shell(ctx, CONNECT.format(port=port))
    assert r["exit_code"] != 0
    assert "connected" not in r["output"]
    assert not accepted(listener)
    # the same command with full access does connect: the test can tell the difference
    ctx = ctx_for(ws, sandbox_mode="danger-full-access", approval_policy="never")
    r = await shell(ctx, CONNECT.format(port=port))
    assert r["output"] == "connected\n"
    assert accepted(listener)


async def test_network_access_setting_lets_it_through(
    ws: Path, backend: str, listener: socket.socket
) -> None:
    ctx = ctx_for(ws, backend=backend, approval_policy="never", network_access=True)
    r = await shell(ctx, CONNECT.format(port=listener.getsockname()[1]))
    assert r["output"] == "connected\n"


async def test_seccomp_denies_ip_and_unix_sockets_and_ptrace(ws: Path, backend: str) -> None:
    if probe().seccomp is not None:
        pytest.skip(f"seccomp cannot run on this machine: {probe().seccomp}")
    ctx = ctx_for(ws, backend=backend, approval_policy="never")
    code = textwrap.dedent(
        """
        import ctypes, socket
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print("udp ok")
        except PermissionError: print("udp denied")
        try:
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print("unix ok")
        except PermissionError: print("unix denied")
        socket.socketpair(); print("socketpair ok")
        libc = ctypes.CDLL(None, use_errno=True)
        print("ptrace", libc.ptrace(0, 0, 0, 0), ctypes.get_errno())
        """
    )
    r = await shell(ctx, f"python3 -c '{code}'")
    expected = ["udp denied", "unix denied", "socketpair ok", "ptrace -1 1"]
    assert r["output"].splitlines() == expected, r["output"]


# --- processes -------------------------------------------------------------------------


async def test_timeout_kills_the_confined_command(ws: Path, backend: str) -> None:
    ctx = ctx_for(ws, backend=backend, approval_policy="never")
    r = await shell(ctx, "sleep 30.4242 & sleep 30.4242; wait", timeout_ms=500)
    assert r["timed_out"] is True
    for _ in range(100):
        alive = subprocess.run(["pgrep", "-f", "sleep 30.4242"], capture_output=True).stdout
        if not alive:
            break
        import asyncio

        await asyncio.sleep(0.05)
    assert not alive


async def test_fail_closed_without_confinement(ws: Path, tmp_path: Path) -> None:
    # A PATH with bash but no bwrap, and Landlock not allowed as a fallback: a real
    # machine without bubblewrap, as far as this process can tell.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "touch"):
        os.symlink(subprocess.check_output(["which", tool], text=True).strip(), bin_dir / tool)
    code = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from codemode.sandbox.session import SandboxSession
        from codemode.sandbox.settings import SandboxSettings
        from codemode.tools import ToolContext, ToolError, builtin_registry
        ws = Path({str(ws)!r})
        s = SandboxSession(ws, SandboxSettings(backend="bubblewrap", approval_policy="never"))
        async def main():
            try:
                await builtin_registry().invoke(
                    "shell", {{"command": "touch made"}}, ToolContext(workspace=ws, sandbox=s))
            except ToolError as e:
                print("refused:", e)
        asyncio.run(main())
        """
    )
    env = {**os.environ, "PATH": str(bin_dir)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.stdout.startswith("refused: tools.shell: sandbox mode workspace-write cannot"), (
        proc.stdout + proc.stderr
    )
    assert "bubblewrap (bwrap) is not installed" in proc.stdout
    assert not (ws / "made").exists()


# --- policy through the tool: refused before anything runs -----------------------------


@pytest.mark.parametrize(
    "attack",
    [
        "echo $(rm -rf {o})",
        "echo `rm -rf {o}`",
        "bash -c 'rm -rf {o}'",
        "echo {o} | xargs rm -rf",
        "env rm -rf {o}",
        "'r'\"m\" -rf {o}",
        "r\\\nm -rf {o}",
        "true\nrm -rf {o}",
    ],
)
async def test_policy_refuses_hidden_deletes_without_an_approver(
    ws: Path, outside: Path, attack: str
) -> None:
    before = snapshot(outside)
    # full access: only the policy stands between the command and the files
    ctx = ctx_for(ws, sandbox_mode="danger-full-access", approval_policy="on-request")
    with pytest.raises(CommandRefused) as info:
        await shell(ctx, attack.format(o=outside))
    message = str(info.value)
    assert "needs approval" in message and "--approval never" in message
    assert snapshot(outside) == before


async def test_forbidden_is_refused_even_with_approval_never(ws: Path) -> None:
    ctx = ctx_for(ws, sandbox_mode="danger-full-access", approval_policy="never")
    with pytest.raises(CommandRefused) as info:
        await shell(ctx, "echo start; rm -rf /")
    assert "forbidden by policy: `rm -rf /`" in str(info.value)


async def test_untrusted_asks_for_anything_not_allowed(ws: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        return "once"

    ctx = ctx_for(
        ws, approval_policy="untrusted", approver=approver, sandbox_mode="danger-full-access"
    )
    assert (await shell(ctx, "ls"))["exit_code"] == 0
    assert asked == []
    assert (await shell(ctx, "touch made"))["exit_code"] == 0
    assert [a.simple_command for a in asked] == ["touch made"]
    assert asked[0].decision == "unmatched"


async def test_approval_once_always_deny(ws: Path, home: Path) -> None:
    answers = ["deny", "once", "always"]
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> str:
        asked.append(request)
        return answers.pop(0)

    ctx = ctx_for(ws, approver=approver, sandbox_mode="danger-full-access")
    cmd = "git push --force origin main"
    with pytest.raises(CommandRefused, match="the user declined to run `git push --force"):
        await shell(ctx, cmd)
    assert asked[0].tool == "shell"
    assert asked[0].rule and asked[0].rule.startswith('prefix_rule(pattern=["git", "push"]')
    assert asked[0].justification and "remote" in asked[0].justification
    # once: runs (git fails outside a repository, but it ran), and the next call asks again
    assert (await shell(ctx, cmd))["exit_code"] != 0
    await shell(ctx, cmd)
    assert len(asked) == 3
    # always: saved as a rule, not asked again in this session...
    await shell(ctx, cmd)
    assert len(asked) == 3
    saved = (home / "rules" / "default.rules").read_text()
    # exactly the command line seen, not a prefix (a prefix used to be stored)
    assert saved == 'allow_command(command="git push --force origin main")\n'
    with pytest.raises(CommandRefused, match="no one can approve"):
        await shell(ctx_for(ws, sandbox_mode="danger-full-access"), cmd + " --mirror")
    # ...nor in the next one, which loads the file
    fresh = ctx_for(ws, approver=approver, sandbox_mode="danger-full-access")
    await shell(fresh, cmd)
    assert len(asked) == 3


# --- code mode is not a side door ------------------------------------------------------


@pytest.mark.parametrize("engine", ["quickjs", "v8"])
async def test_code_mode_gets_a_catchable_exception(ws: Path, outside: Path, engine: str) -> None:
    before = snapshot(outside)
    host = ToolHost(ws, engine=engine, sandbox=SandboxSettings(approval_policy="on-request"))
    code = f"""
    const tries = [
      "rm -rf {outside}", "bash -c 'rm -rf {outside}'", "rm -rf /",
    ];
    const results = await Promise.allSettled(tries.map(c => tools.shell({{command: c}})));
    const out = results.map(r => r.status === "rejected" ? r.reason.message : "ran");
    try {{ await tools.write_file({{path: "../outside/victim.txt", content: "x"}}) }}
    catch (e) {{ out.push(e.message) }}
    return out;
    """
    try:
        r = await host.execute(code)
    finally:
        host.close()
    assert r.ok, r.error
    assert "needs approval" in r.value[0]
    assert "needs approval" in r.value[1]
    assert "forbidden by policy" in r.value[2]
    assert "refusing to write ../outside/victim.txt: outside the writable roots" in r.value[3]
    assert snapshot(outside) == before


async def test_approval_request_carries_the_program(ws: Path) -> None:
    seen: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> str:
        seen.append(request)
        return "deny"

    settings = SandboxSettings(sandbox_mode="danger-full-access")
    host = ToolHost(ws, sandbox=settings, approver=approver)
    code = 'try { await tools.shell({command: "git reset --hard"}) } catch (e) { return e.message }'
    try:
        r = await host.execute(code)
    finally:
        host.close()
    assert r.value == "tools.shell: the user declined to run `git reset --hard`"
    assert seen[0].program == code


# --- file tools obey the same writable roots -------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "../outside/victim.txt",
        "{o}/victim.txt",
        "link/victim.txt",
        "sub/../../outside/victim.txt",
        "linkfile",
        ".git/hooks/pre-commit",
        ".codemode/rules/evil.rules",
        "sub/.codemode/rules/evil.rules",
        ".git/config",
        ".git/modules/sub/hooks/post-checkout",
        "sub/.git",
        "/proc/self/root{o}/victim.txt",
    ],
)
async def test_file_tools_cannot_write_outside(ws: Path, outside: Path, path: str) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "linkfile").symlink_to(outside / "victim.txt")
    (ws / ".git" / "hooks").mkdir(parents=True)
    before = snapshot(outside)
    for ctx in (ToolContext(workspace=ws), ctx_for(ws)):
        with pytest.raises(ToolError, match="refusing to write"):
            await builtin_registry().invoke(
                "write_file", {"path": path.format(o=outside), "content": "pwned"}, ctx
            )
    assert snapshot(outside) == before
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_patch_paths_go_through_resolve_writable(ws: Path, outside: Path) -> None:
    # apply_patch resolves every path it touches with resolve_writable (once merged)
    (ws / "link").symlink_to(outside)
    ctx = ctx_for(ws)
    assert ctx.resolve_writable("src/new.py") == ws / "src" / "new.py"
    for path in ["../outside/x.py", "a/../../outside/x.py", "link/x.py", str(outside / "x.py")]:
        with pytest.raises(ToolError, match="outside the writable roots"):
            ctx.resolve_writable(path)
    ro = ctx_for(ws, sandbox_mode="read-only")
    with pytest.raises(ToolError, match="read-only"):
        ro.resolve_writable("src/new.py")


# --- environment hygiene ---------------------------------------------------------------


async def test_credentials_are_not_inherited(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    monkeypatch.setenv("MY_SECRET", "s")
    monkeypatch.setenv("HARMLESS", "visible")
    cmd = 'echo "[$OPENAI_API_KEY][$GITHUB_TOKEN][$MY_SECRET][$HARMLESS]"'
    r = await shell(ToolContext(workspace=ws), cmd)
    assert r["output"] == "[][][][visible]\n"
    ctx = ctx_for(ws, sandbox_mode="danger-full-access", env_allowlist=["GITHUB_TOKEN"])
    r = await shell(ctx, cmd)
    assert r["output"] == "[][ghp-secret][][visible]\n"


async def test_login_shell_is_opt_in(ws: Path) -> None:
    ctx = ctx_for(ws, sandbox_mode="danger-full-access")
    r = await shell(ctx, "shopt -q login_shell && echo login || echo plain")
    assert r["output"] == "plain\n"
    ctx = ctx_for(ws, sandbox_mode="danger-full-access", login_shell=True)
    r = await shell(ctx, "shopt -q login_shell && echo login || echo plain")
    assert r["output"] == "login\n"


# --- interpreter run --sandbox / --approval / --full-auto ------------------------------


def interp(*args: str, cwd: Path, input: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INTERPRETER), "run", "-", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_run_sandbox_options(ws: Path) -> None:
    if probe().bubblewrap is not None and probe().landlock is not None:
        pytest.skip("no confinement backend works on this machine")
    prog = (
        'const w = await tools.shell({command: "echo hi > made.txt"});\n'
        'let p; try { await tools.shell({command: "git reset --hard"}); p = "ran" }\n'
        "catch (e) { p = e.message }\n"
        "return [w.exit_code, p];\n"
    )
    proc = interp("--sandbox", "read-only", cwd=ws, input=prog)
    assert proc.returncode == 0, proc.stderr
    code, refused = __import__("json").loads(proc.stdout)
    assert code != 0 and not (ws / "made.txt").exists()
    assert "needs approval" in refused and "--full-auto" in refused
    proc = interp("--full-auto", cwd=ws, input=prog)
    code, ran = __import__("json").loads(proc.stdout)
    assert code == 0 and (ws / "made.txt").exists() and ran == "ran"
    proc = interp("--full-auto", "--approval", "never", cwd=ws, input=prog)
    assert proc.returncode == 2
    assert "--full-auto cannot be combined" in proc.stderr


async def test_a_confined_command_leaves_no_empty_codemode_folder(ws: Path) -> None:
    host = ToolHost(ws, sandbox=SandboxSettings())
    try:
        r = await host.execute(
            "const r = await tools.shell({command: 'mkdir .codemode/x; echo ok > made.txt'});"
            "return r.exit_code"
        )
    finally:
        host.close()
    assert r.ok, r.error
    assert (ws / "made.txt").read_text() == "ok\n"  # the command ran, confined
    assert not (ws / ".codemode").exists()  # it could not create it, and nothing is left
