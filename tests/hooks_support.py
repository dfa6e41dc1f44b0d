"""Helpers for hook tests: hook scripts written to files, hooks configured in a home or
a project, and an in-process session against the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from codemode.assembly.options import SessionOptions, SessionSpec
from codemode.assembly.session import build_session
from codemode.config import load_config
from codemode.providers.catalog import ProviderInfo, open_provider
from codemode_testkit.scripted.in_process import IN_PROCESS_BASE_URL, ScriptedTransport
from codemode_testkit.scripted.script import ScriptedModel

PYTHON = sys.executable

# A hook in Python that appends its input (one JSON line) to $HOOK_LOG, then answers
# with what $HOOK_ANSWER_<EVENT> holds (JSON), if anything.
RECORDER = """\
import json, os, sys
data = json.load(sys.stdin)
with open(os.environ["HOOK_LOG"], "a") as log:
    log.write(json.dumps(data) + "\\n")
answer = os.environ.get("HOOK_ANSWER_" + data["hook_event_name"].upper())
if answer:
    print(answer)
"""


def confined_reasons(home: Path, work: Path, store: Any) -> list[str]:
    """Why the workspace's first hook runs confined, as the engine decides it (its
    command's programs, then what its trusted scripts start, ``store`` being its
    ``TrustStore``); empty: it runs on the host."""
    from codemode.hooks import project_runners, script_scan
    from codemode.hooks.discovery import discover
    from codemode.hooks.process import argv_for, project_env
    from codemode.locations import launcher

    hook = discover(work, home).hooks[0]
    env = project_env(os.environ, work)
    argv = argv_for(hook.command)
    named = launcher.named_files(argv, work, env)
    scanned = script_scan.scan(named, store.trusted_files(hook), work, env)
    return project_runners.notes(argv, work, env) + scanned.reasons


def script(folder: Path, name: str, text: str) -> Path:
    """An executable script file (its first line says what runs it)."""
    path = folder / name
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def python_hook(folder: Path, name: str, body: str) -> str:
    """The command running a Python hook script with ``body``."""
    path = script(folder, name, body)
    return f"{PYTHON} {path}"


def hooks_table(
    event: str, command: str, matcher: str | None = None, **hook: Any
) -> dict[str, Any]:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, **hook}]}
    if matcher is not None:
        group["matcher"] = matcher
    return {event: [group]}


def merge(*tables: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for table in tables:
        for event, groups in table.items():
            out.setdefault(event, []).extend(groups)
    return out


def write_hooks(path: Path, table: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": table}, indent=1), encoding="utf-8")
    return path


def logged(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


class Run:
    def __init__(self, events: list[BaseModel], result: Any, model: ScriptedModel) -> None:
        self.events = [e.model_dump(mode="json") for e in events]
        self.result = result
        self.model = model

    def items(self, kind: str) -> list[dict[str, Any]]:
        return [e["item"] for e in self.events
                if e.get("type") == "item.completed" and e["item"]["type"] == kind]

    def notices(self) -> list[str]:
        return [e["message"] for e in self.events if e.get("type") == "notice"]

    def sent(self, n: int) -> str:
        """The n-th request the model was sent, as JSON text."""
        return json.dumps(self.model.requests[n].body)


def run_session(
    home: Path,
    work: Path,
    replies: list[dict[str, Any]],
    prompt: str = "go",
    *,
    overrides: list[str] = (),  # type: ignore[assignment]
    run_untrusted: bool = False,
    prompts: list[str] | None = None,
    approval_policy: str = "never",
    harness: str = "native",
    code_mode: bool = True,
) -> Run:
    """One in-process code-mode session (native harness) with ``replies`` scripted; the
    session's CODEMODE_HOME is ``home``."""
    before = os.environ.get("CODEMODE_HOME")
    os.environ["CODEMODE_HOME"] = str(home)
    try:
        return _run(home, work, replies, prompt, overrides, run_untrusted, prompts,
                    approval_policy, harness, code_mode)
    finally:
        if before is None:
            os.environ.pop("CODEMODE_HOME", None)
        else:
            os.environ["CODEMODE_HOME"] = before


def _run(
    home: Path,
    work: Path,
    replies: list[dict[str, Any]],
    prompt: str,
    overrides: Any,
    run_untrusted: bool,
    prompts: list[str] | None,
    approval_policy: str,
    harness: str,
    code_mode: bool,
) -> Run:
    model = ScriptedModel(replies)
    info = ProviderInfo(name="scripted", base_url=IN_PROCESS_BASE_URL, wire_api="chat")
    provider = open_provider(info, api_key="sk-test", http_transport=ScriptedTransport(model))
    events: list[BaseModel] = []
    options = SessionOptions(cwd=work, model="test-model", code_mode=code_mode, harness=harness,
                             sandbox_mode="workspace-write", approval_policy=approval_policy)
    config = load_config(["model_provider=scripted", *overrides], home=home)
    spec = SessionSpec(listeners=[events.append], provider=provider, provider_name="scripted",
                       record=False, run_untrusted_hooks=run_untrusted)
    session = build_session(config, options, spec)

    async def go() -> Any:
        try:
            result = None
            for text in prompts or [prompt]:
                result = await session.run_turn(text)
            return result
        finally:
            await session.aclose()

    result = asyncio.run(go())
    return Run(events, result, model)


async def acp_session(conn: Any, work: Path) -> str:
    """Initialize an ACP connection (a client that reads and writes no files itself) and
    open a session in ``work``: its id."""
    from acp import PROTOCOL_VERSION
    from acp.schema import ClientCapabilities, FileSystemCapabilities

    await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False)))
    session = await conn.new_session(cwd=str(work), mcp_servers=[])
    return str(session.session_id)
