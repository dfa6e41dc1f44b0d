"""The composition root (codemode.assembly): every entry point gets a whole session from
it, ``Session.aclose`` ends one (engine worker and MCP server processes gone), the turn
loop says why a turn stopped, and the catalog resolution's precedence."""

from __future__ import annotations

import ast
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from agent_support import call
from mcp_support import server_command

from codemode.agent.loop import Session
from codemode.agent.turn_result import TurnResult
from codemode.assembly.model import choose_model, provider_named
from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import build_session
from codemode.config import ConfigError, load_config
from codemode.providers.catalog import provider_info, resolve_provider
from codemode_testkit.scripted_server import ScriptedModelServer

ROOT = Path(__file__).parent.parent
PROBE = Path(__file__).parent / "mcp_servers" / "probe_server.py"


def scripted(server: ScriptedModelServer, *extra: str) -> list[str]:
    return [
        "model_provider=scripted",
        f"model_providers.scripted.base_url={server.base_url}",
        "model_providers.scripted.wire_api=chat",
        *extra,
    ]


@pytest.fixture
def env_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEMODE_HOME", str(home))
    return home


def build(
    overrides: list[str], work: Path, spec: SessionSpec | None = None, **options: Any
) -> Session:
    config = load_config(overrides)
    return build_session(
        config, SessionOptions(cwd=work, overrides=overrides, model="m", **options), spec
    )


def gone(pid: int, timeout_s: float = 30) -> bool:
    """Whether process ``pid`` has exited and been reaped (or is only a zombie)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# --- sessions are whole when built -----------------------------------------------------


def test_exec_output_schema_is_part_of_the_built_session(env_home: Path, work: Path) -> None:
    strict = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    loose = {"type": "object", "properties": {"answer": {"type": "string"}}}
    seen: list[Any] = []
    with ScriptedModelServer([]) as server:
        plain = build(scripted(server), work, SessionSpec(listeners=[seen.append]))
        enforced = build(scripted(server), work, SessionSpec(output_schema=strict))
        checked = build(scripted(server), work, SessionSpec(output_schema=loose))
        try:
            assert plain.final_check is None and plain.output_schema is None
            assert plain.listeners == [seen.append]
            assert enforced.output_schema == strict  # the wire enforces it too
            assert enforced.final_check is not None
            assert enforced.final_check('{"answer": "x"}') is None
            assert enforced.final_check("not json") is not None
            assert '"answer"' in enforced.instructions
            assert '"answer"' not in plain.instructions
            assert checked.output_schema is None and checked.final_check is not None
        finally:
            for session in (plain, enforced, checked):
                asyncio.run(session.aclose())


def test_acp_session_gets_its_editor_and_approver_at_build(env_home: Path, work: Path) -> None:
    from codemode.acp.client import AcpApprover, AcpToolClient
    from codemode.acp.server import AcpOptions, CodemodeAcpAgent

    class Conn:
        async def session_update(self, **kwargs: Any) -> None:
            return None

    async def main(server: ScriptedModelServer) -> None:
        agent = CodemodeAcpAgent(AcpOptions(overrides=scripted(server), model="m"))
        agent.on_connect(Conn())
        opened = await agent.new_session(cwd=str(work), mcp_servers=[])
        live = agent.sessions.find(opened.session_id)
        assert live is not None
        session = live.session
        assert session is not None and session.id == opened.session_id == live.session_id
        context = session.runner.context
        assert isinstance(context.client, AcpToolClient)
        assert context.sandbox is not None and isinstance(context.sandbox.approver, AcpApprover)
        await agent.close()
        assert session.closed

    with ScriptedModelServer([]) as server:
        asyncio.run(main(server))


def test_interactive_session_gets_the_terminal_approver_at_build(
    env_home: Path, work: Path
) -> None:
    from codemode.tui.app import InteractiveApp, InteractiveOptions

    async def main(server: ScriptedModelServer) -> None:
        overrides = scripted(server)
        app = InteractiveApp(
            InteractiveOptions(cwd=work, overrides=overrides, model="m"), load_config(overrides)
        )
        session = app.open_session()
        sandbox = session.runner.context.sandbox
        assert sandbox is not None and sandbox.approver is app.approver
        assert app.renderer in session.listeners
        app.set_permissions("read-only", "never")
        sandbox = session.runner.context.sandbox
        assert sandbox is not None and sandbox.settings.sandbox_mode == "read-only"
        assert sandbox.approver is app.approver  # kept across the change
        await app.close_session()
        await app._wait_prepared()
        app.snapshots.close()
        assert session.closed

    with ScriptedModelServer([]) as server:
        asyncio.run(main(server))


def test_resumed_session_keeps_its_id_and_a_given_id_is_used(env_home: Path, work: Path) -> None:
    from codemode.agent.rollout import read_session

    with ScriptedModelServer([{"text": "first"}]) as server:
        chosen = build(scripted(server), work, SessionSpec(session_id="given-id"))
        assert chosen.id == "given-id"
        asyncio.run(chosen.run_turn("hello"))
        asyncio.run(chosen.aclose())
        assert chosen.rollout is not None
        recorded = read_session(chosen.rollout.path)
        resumed = build(scripted(server), work, SessionSpec(resume=recorded, session_id="other"))
        assert resumed.id == recorded.meta.id == "given-id"
        asyncio.run(resumed.aclose())


def test_tool_host_dry_run_is_given_at_construction(work: Path) -> None:
    """`interpreter run --dry-run` and the batch worker: the host is built with its dry
    run, so no file is written and the host knows what would have changed."""
    from codemode.host import ToolHost

    async def main() -> None:
        with ToolHost(work, dry_run=True) as host:
            assert host.dry_run is not None and host.context.dry_run is host.dry_run
            result = await host.execute(
                "await tools.write_file({path: 'new.txt', content: 'x'});"
                "return (await tools.read_file({path: 'new.txt'})).content"
            )
            assert result.ok, result.error
            assert result.value.strip().endswith("x")  # reads see the overlay
            assert host.dry_run.changed_paths(host.workspace) == ["new.txt"]
        with ToolHost(work) as host:
            assert host.dry_run is None and host.context.dry_run is None

    asyncio.run(main())
    assert not (work / "new.txt").exists()


def test_batch_worker_dry_run_builds_its_host_whole(work: Path) -> None:
    from codemode.batch.models import RepoTask
    from codemode.batch.worker import run_repository

    source = "await tools.write_file({path: 'notes.txt', content: 'changed\\n'}); return 1"
    result = run_repository(RepoTask(repository=str(work), source=source, dry_run=True))
    assert result.status == "ok", result.error
    assert result.changed_files == ["notes.txt"] and result.diff and "+changed" in result.diff
    assert (work / "notes.txt").read_text() == "alpha\nbeta\n"


# Modules that build sessions or hosts and then use them.
ENTRY_POINTS = [
    "codemode/commands/exec.py",
    "codemode/acp/server.py",
    "codemode/batch/worker.py",
    "codemode/tui/app.py",
    "codemode/tui/commands.py",
    "codemode/commands/run.py",
    "codemode/host/tool_host.py",
    "codemode/commands/mcp.py",
]
# What belongs to a built session or host: an entry point may read these, never set them
# (nor anything reached through them).
BUILT_PARTS = {"session", "host", "s"}
INTERNALS = {"runner", "context", "rollout", "provider", "sandbox", "registry", "instructions",
             "final_check", "output_schema", "model", "model_facts", "listeners", "dry_run"}


def _chain(node: ast.expr) -> list[str]:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_entry_points_do_not_patch_what_they_built(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    patched = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            chain = _chain(target) if isinstance(target, ast.Attribute) else []
            if not chain:
                continue
            # `session.x = ...`, `host.context.y = ...`, `self.session.runner.z = ...`
            rooted = chain[0] in BUILT_PARTS or "session" in chain[1:-1]
            reaches = any(part in INTERNALS for part in chain[1:])
            if rooted and reaches:
                patched.append(f"{module}:{node.lineno}: {'.'.join(chain)}")
    assert patched == []


def test_the_patch_detector_finds_a_patch() -> None:
    tree = ast.parse("session.runner.context.client = c\nself.session.instructions += 'x'\n")
    found = [
        ".".join(_chain(t))
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AugAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
    ]
    assert found == ["session.runner.context.client", "self.session.instructions"]
    for chain in (c.split(".") for c in found):
        assert chain[0] in BUILT_PARTS or "session" in chain[1:-1]


# --- Session.aclose ---------------------------------------------------------------------


def test_aclose_is_idempotent_and_stops_the_worker_and_mcp_servers(
    env_home: Path, work: Path
) -> None:
    program = "return (await tools.probe.pid({})).total"
    script = [{"tool_calls": [call("exec", {"code": program})]}, {"text": "done"}]
    command, *args = server_command(PROBE)  # forked: tests/mcp_support.py
    with ScriptedModelServer(script) as server:
        overrides = scripted(
            server,
            "code_mode=true",
            f"mcp_servers.probe.command={json.dumps(command)}",
            f"mcp_servers.probe.args={json.dumps(args)}",
            'mcp_servers.probe.trust="read"',
        )
        session = build(overrides, work)

        async def main() -> TurnResult:
            result = await session.run_turn("pid?")
            worker = session.runner._session._isolates._worker
            assert worker is not None and worker.alive()
            pids.append(worker.pid)
            await session.aclose()
            await session.aclose()  # a second close does nothing, and does not fail
            return result

        pids: list[int] = []
        result = asyncio.run(main())
    assert result.stop_reason == "completed", result.error
    tool_output = server.requests[1].body["messages"][-1]["content"]
    mcp_pid = int("".join(ch for ch in tool_output.split("[return value]")[-1] if ch.isdigit()))
    assert mcp_pid != pids[0]
    assert gone(pids[0]), "the engine worker outlived aclose"
    assert gone(mcp_pid), "the MCP server outlived aclose"
    assert session.closed and session.rollout is not None
    assert session.rollout.path.read_text().strip()  # written and closed, still readable


# --- TurnResult.stop_reason --------------------------------------------------------------


def test_stop_reason_completed_and_max_turns(env_home: Path, work: Path) -> None:
    again = {"tool_calls": [call("exec", {"code": "return 1"})]}
    with ScriptedModelServer([{"text": "done"}, again, again]) as server:
        session = build(scripted(server, "code_mode=true"), work, max_turns=2)

        async def main() -> list[TurnResult]:
            try:
                return [await session.run_turn("one"), await session.run_turn("two")]
            finally:
                await session.aclose()

        done, exhausted = asyncio.run(main())
    assert (done.ok, done.stop_reason, done.final_message) == (True, "completed", "done")
    assert (exhausted.ok, exhausted.stop_reason) == (False, "max_turns")
    assert exhausted.model_requests == 2


def test_stop_reason_cancelled_is_kept_on_the_session(env_home: Path, work: Path) -> None:
    with ScriptedModelServer([{"text": "late", "hang_s": 30}]) as server:
        session = build(scripted(server), work)

        async def main() -> None:
            turn = asyncio.create_task(session.run_turn("wait"))
            await asyncio.to_thread(server.wait_for_requests, 1, 30)
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            await session.aclose()

        asyncio.run(main())
    assert session.last_result is not None
    assert (session.last_result.ok, session.last_result.stop_reason) == (False, "cancelled")


def test_stop_reason_provider_error(env_home: Path, work: Path) -> None:
    refused = {"status": 400, "error_message": "scripted refusal"}
    with ScriptedModelServer([refused]) as server:
        session = build(scripted(server), work)
        result = asyncio.run(session.run_turn("x"))
        asyncio.run(session.aclose())
    assert (result.stop_reason, result.ok) == ("provider_error", False)
    assert result.error is not None and "scripted refusal" in result.error


def test_acp_prompt_answers_from_the_stop_reason(env_home: Path, work: Path) -> None:
    """ACP's stop reasons come from TurnResult.stop_reason: end_turn, max_turn_requests,
    cancelled; any other ending fails the request with the turn's error."""
    from acp import RequestError, text_block

    from codemode.acp.server import AcpOptions, CodemodeAcpAgent

    class Conn:
        async def session_update(self, **kwargs: Any) -> None:
            return None

    again = {"tool_calls": [call("exec", {"code": "return 1"})]}
    script = [
        {"text": "done"},
        again,
        {"text": "late", "hang_s": 20},
        {"status": 400, "error_message": "scripted refusal"},
    ]

    async def main(server: ScriptedModelServer) -> list[str]:
        overrides = scripted(server, "code_mode=true", "max_turns=1")
        agent = CodemodeAcpAgent(AcpOptions(overrides=overrides, model="m"))
        agent.on_connect(Conn())
        sid = (await agent.new_session(cwd=str(work), mcp_servers=[])).session_id
        reasons = []
        try:
            for _ in range(2):
                answer = await agent.prompt([text_block("go")], sid)
                reasons.append(answer.stop_reason)
            pending = asyncio.create_task(agent.prompt([text_block("wait")], sid))
            await asyncio.to_thread(server.wait_for_requests, 3, 30)
            await agent.cancel(sid)
            reasons.append((await pending).stop_reason)
            with pytest.raises(RequestError, match="scripted refusal"):
                await agent.prompt([text_block("fail")], sid)
        finally:
            await agent.close()
        return reasons

    with ScriptedModelServer(script) as server:
        assert asyncio.run(main(server)) == ["end_turn", "max_turn_requests", "cancelled"]


# --- catalog resolution ------------------------------------------------------------------


def test_catalog_entry_under_the_users_table_under_command_line_overrides(
    env_home: Path,
) -> None:
    (env_home / "config.toml").write_text(
        '[model_providers.deepseek]\nbase_url = "http://127.0.0.1:9/v1"\n'
        'name = "My DeepSeek"\ntemperature = 0.3\n',
        encoding="utf-8",
    )
    config = load_config()
    resolved = resolve_provider("deepseek", config.model_providers)
    assert resolved.info is not None and resolved.catalog is not None
    assert resolved.info.base_url == "http://127.0.0.1:9/v1"  # the table wins
    assert resolved.catalog.base_url == "https://api.deepseek.com/v1"
    assert resolved.info.env_key == "DEEPSEEK_API_KEY"  # kept from the catalog
    assert resolved.info.description == "My DeepSeek"  # Codex's display name
    assert resolved.default_model == "deepseek-chat" and resolved.family == "deepseek"
    # -c beats the file, for the table and for the top level.
    cli = load_config(["model_providers.deepseek.base_url=http://127.0.0.1:10/v1",
                       "model_providers.deepseek.default_model=mine"])
    again = resolve_provider("deepseek", cli.model_providers)
    assert again.info is not None and again.info.base_url == "http://127.0.0.1:10/v1"
    assert again.default_model == "mine"
    # The same merge behind provider_info (listing) and the session's resolution.
    assert provider_info("deepseek", config.model_providers["deepseek"]) == resolved.info
    assert provider_named(config, "deepseek").info == resolved.info


def test_model_and_sampling_precedence(env_home: Path) -> None:
    (env_home / "config.toml").write_text(
        'temperature = 0.5\nmax_output_tokens = 1000\n'
        '[model_providers.llamacpp]\ntemperature = 0.2\ndefault_model = "from-table"\n'
        '[model_settings."special"]\ntemperature = 0.1\n',
        encoding="utf-8",
    )
    config = load_config()
    local = provider_named(config, "llamacpp")
    choice = choose_model(config, local, None, [])
    assert choice.model == "from-table"  # the table's default_model
    assert choice.sampling.temperature == 0.2  # the table beats the top level
    assert choice.sampling.max_output_tokens == 1000  # the top level beats the catalog's 4096
    special = choose_model(config, local, "special", ["temperature=0.9"])
    assert special.model == "special" and special.sampling.temperature == 0.9  # -c beats all
    assert choose_model(config, local, "special", []).sampling.temperature == 0.1
    bare = load_config(["model=top"])
    assert choose_model(bare, provider_named(bare, "llamacpp"), None, []).model == "top"
    (env_home / "config.toml").write_text("", encoding="utf-8")
    empty = load_config()
    ollama = choose_model(empty, provider_named(empty, "ollama"), "x", [])
    assert ollama.sampling.max_output_tokens == 4096  # the catalog's default


def test_unknown_and_invalid_providers(env_home: Path) -> None:
    config = load_config(["model_providers.broken.wire_api=carrier-pigeon"])
    with pytest.raises(ConfigError, match="unknown provider 'nowhere'"):
        provider_named(config, "nowhere")
    assert provider_named(config, "nowhere", known=False).info is None  # a handed-in one
    with pytest.raises(ConfigError, match=r"\[model_providers.broken\]: .*unknown wire"):
        provider_named(config, "broken", known=False)
    with pytest.raises(KeyError):
        provider_info("nowhere")


def test_a_session_that_fails_to_build_closes_its_sandbox(
    env_home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox is made first (its warm-up runs while the rest is built); when the
    rest fails, as for a provider nobody knows, it is closed again."""
    from codemode.sandbox.session import SandboxSession

    closed: list[SandboxSession] = []
    real_close = SandboxSession.close

    def close(self: SandboxSession) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(SandboxSession, "close", close)
    with pytest.raises(ConfigError, match="nowhere"):
        build(["model_provider=nowhere"], work)
    assert len(closed) == 1 and closed[0].workspace == work.resolve()
