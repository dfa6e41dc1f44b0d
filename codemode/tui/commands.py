"""Slash commands of the interactive session, one small function each.

A command gets the app and the text after its name. Errors are shown, never raised:
a mistyped command must not end the session.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

if TYPE_CHECKING:
    from codemode.tui.protocols import App

Handler = Callable[["App", str], Awaitable[None]]


@dataclass(frozen=True)
class Command:
    usage: str
    summary: str
    run: Handler


COMMANDS: dict[str, Command] = {}


def command(name: str, usage: str, summary: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = Command(usage, summary, fn)
        return fn

    return register


async def run_command(app: App, line: str) -> None:
    name, _, arg = line.strip().partition(" ")
    found = COMMANDS.get(name)
    if found is None:
        from codemode.terminal.hints import near_names

        close = near_names(name, COMMANDS)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (/help lists them)"
        app.renderer.note(f"unknown command {name}{hint}", style="red")
        return
    try:
        await found.run(app, arg.strip())
    except Exception as exc:  # a command failing must leave the session usable
        app.renderer.note(f"{name}: {exc}", style="red")


def _say(app: App, text: str, style: str = "") -> None:
    app.renderer.flush_streams()
    app.console.print(Text(text, style=style))


@command("/help", "/help", "list the commands")
async def _help(app: App, arg: str) -> None:
    width = max(len(c.usage) for c in COMMANDS.values())
    for cmd in COMMANDS.values():
        _say(app, f"{cmd.usage.ljust(width)}  {cmd.summary}")
    _say(
        app,
        "@path attaches a file · Alt-Enter or Ctrl-J: new line · Esc or Ctrl-C interrupts a "
        "turn · Ctrl-C twice on an empty line exits · Ctrl-D exits",
        "dim",
    )


@command("/exit", "/exit", "leave (the session is saved; interpreter resume reopens it)")
async def _exit(app: App, arg: str) -> None:
    app.done = True


COMMANDS["/quit"] = Command("/quit", "same as /exit", _exit)


def _facts_line(facts: Any) -> str:
    """What the provider catalog says about the model, in a few words."""
    if facts is None:
        return "no facts about this model"
    window = f"{facts.context_window:,}-token context" if facts.context_window else "context ?"
    reasons = "reasons" if facts.reasoning else "does not reason"
    tools = "calls tools" if facts.tool_calling else "cannot call tools"
    return f"{window}, {reasons}, {tools}, reads {'+'.join(facts.input)}"


@command("/status", "/status", "model, harness, dialect, sandbox, tokens, session id and file")
async def _status(app: App, arg: str) -> None:
    s = app.session
    assert s is not None
    u = s.total_usage
    rows = [
        ("model", f"{s.model} ({app.provider_name()})"),
        ("catalog", _facts_line(s.model_facts)),
        ("harness", s.harness.name),
        ("dialect", getattr(s.harness, "dialect", "?")),
        ("sandbox", app.sandbox_mode),
        ("approval", app.approval_policy),
        ("tokens", f"{u.input_tokens} in ({u.cached_input_tokens} cached) · {u.output_tokens} out"),
        ("session", s.id),
        ("file", str(s.rollout.path) if s.rollout else "(not recorded)"),
        ("workspace", str(app.cwd)),
    ]
    for key, value in rows:
        _say(app, f"{key:<10} {value}")


@command("/model", "/model [PROVIDER] [MODEL]", "show or switch the provider and model")
async def _model(app: App, arg: str) -> None:
    from codemode.assembly.model import open_named
    from codemode.providers.catalog import provider_names

    s = app.session
    assert s is not None
    words = arg.split()
    if not words:
        _say(app, f"{s.model} via {app.provider_name()}")
        _say(app, "switch: /model MODEL, /model PROVIDER, /model PROVIDER MODEL", "dim")
        return
    provider_name, model = (words[0], words[1] if len(words) > 1 else None)
    if provider_name not in provider_names(app.config.model_providers):
        if len(words) > 1:
            raise ValueError(
                f"unknown provider {provider_name!r}; `interpreter providers` lists them"
            )
        provider_name, model = "", words[0]
    provider = None
    if provider_name:
        provider, resolved = open_named(app.config, provider_name)
        app.options.provider = resolved.name
        model = model or resolved.default_model
    await s.use_model(model, provider)
    if model:
        app.options.model = model
    app.record_settings()
    _say(app, f"now using {s.model} via {app.provider_name()}", "green")


@command("/harness", "/harness [NAME]", "list the harnesses or switch to one")
async def _harness(app: App, arg: str) -> None:
    from codemode.harnesses.catalog import harness_names

    s = app.session
    assert s is not None
    dialect = getattr(s.harness, "dialect", "classic")
    if not arg:
        for name in harness_names():
            mark = "*" if name == s.harness.name else " "
            _say(app, f"{mark} {name}")
        return
    app.switch_harness(arg, dialect)
    _say(app, f"harness {arg} ({dialect} dialect) from the next message on", "green")


@command("/code-mode", "/code-mode [on|off]", "toggle the code dialect (JavaScript) and classic")
async def _code_mode(app: App, arg: str) -> None:
    s = app.session
    assert s is not None
    current = getattr(s.harness, "dialect", "classic")
    if arg in ("on", "true", "code"):
        dialect = "code"
    elif arg in ("off", "false", "classic"):
        dialect = "classic"
    elif not arg:
        dialect = "classic" if current == "code" else "code"
    else:
        raise ValueError(f"expected on or off, not {arg!r}")
    app.switch_harness(s.harness.name, dialect)
    label = "code mode (one exec tool running JavaScript)" if dialect == "code" else "classic"
    _say(app, f"dialect: {label}", "green")


@command("/permissions", "/permissions [MODE] [POLICY]", "show or change sandbox and approvals")
async def _permissions(app: App, arg: str) -> None:
    from codemode.sandbox.modes import APPROVAL_POLICIES, SANDBOX_MODES

    mode, policy = app.sandbox_mode, app.approval_policy
    for word in arg.split():
        if word in SANDBOX_MODES:
            mode = word
        elif word in APPROVAL_POLICIES:
            policy = word
        else:
            raise ValueError(
                f"{word!r} is neither a sandbox mode ({', '.join(SANDBOX_MODES)}) nor an "
                f"approval policy ({', '.join(APPROVAL_POLICIES)})"
            )
    if arg:
        app.set_permissions(mode, policy)
    _say(app, f"sandbox   {mode}    ({', '.join(SANDBOX_MODES)})")
    _say(app, f"approval  {policy}    ({', '.join(APPROVAL_POLICIES)})")


@command("/diff", "/diff", "what changed in the workspace (git diff, or the session's turns)")
async def _diff(app: App, arg: str) -> None:
    from codemode.tui.diffs import diff_renderable

    inside = await _git(app, "rev-parse", "--is-inside-work-tree")
    if inside is None or inside.strip() != "true":
        paths = sorted({p for turn in app.snapshots.turns for p in turn.paths()})
        if not paths:
            _say(app, "not a git repository, and no turn of this session changed a file")
        else:
            _say(app, "not a git repository; files changed by this session's turns:")
            for path in paths:
                _say(app, f"  {path}")
        return
    # A setting of the repository's own that names a program (a clean filter runs for
    # `git diff HEAD`; so might a key git adds later) makes /diff decline, by name.
    from codemode.sandbox.git.repo_config import RepoConfigRefused, check

    try:
        await asyncio.to_thread(check, Path(app.cwd))
    except RepoConfigRefused as exc:
        _say(app, f"/diff does not run git here: {exc}")
        return
    diff = await _git(app, "diff", "--no-color", "HEAD") or ""
    if not diff.strip():
        diff = await _git(app, "diff", "--no-color") or ""
    untracked = await _git(app, "ls-files", "--others", "--exclude-standard") or ""
    if not diff.strip() and not untracked.strip():
        _say(app, "no changes")
        return
    if diff.strip():
        app.renderer.flush_streams()
        app.console.print(diff_renderable(diff))
    for path in untracked.splitlines():
        _say(app, f"new file: {path}", "green")


async def _git(app: App, *args: str) -> str | None:
    # hardened: a program may have planted config, hooks or attributes that run commands
    from codemode.locations import launcher
    from codemode.sandbox.git.host_git import git_argv, git_env

    try:
        proc = await launcher.start(
            git_argv(*args),
            names_files=False,  # (paths and refs: data)
            cwd=app.cwd,
            env=git_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return None
    out, _ = await proc.communicate()
    return out.decode("utf-8", errors="replace") if proc.returncode == 0 else None


@command("/undo", "/undo", "revert the file changes of the last turn")
async def _undo(app: App, arg: str) -> None:
    result = await asyncio.to_thread(app.snapshots.undo)
    if result is None and app.snapshots.disabled:
        _say(app, f"/undo is off: {app.snapshots.disabled}")
        return
    if result is None:
        _say(app, "nothing to undo: no turn of this session changed a file")
        return
    for path in result.restored:
        _say(app, f"restored {path}", "green")
    for path in result.removed:
        _say(app, f"removed {path}", "green")
    for path in result.skipped:
        _say(app, f"left as is (too big to snapshot): {path}", "yellow")
    for problem in result.failed:
        _say(app, f"left as is, could not restore {problem}", "yellow")
    touched = ", ".join([*result.restored, *result.removed])
    app.pending_note = (
        "[The user reverted the file changes of your previous turn: "
        f"{touched or 'nothing restorable'}. Those files are back as they were before it.]"
    )


@command("/compact", "/compact", "drop old tool outputs from the conversation to free context")
async def _compact(app: App, arg: str) -> None:
    assert app.session is not None
    before = sum(len(str(getattr(m, "content", ""))) for m in app.session.messages)
    cut = await app.session.compact("manual", keep=0)
    after = sum(len(str(getattr(m, "content", ""))) for m in app.session.messages)
    _say(app, f"compacted {cut} tool output{'s' if cut != 1 else ''} ({before - after} chars)")


@command("/new", "/new", "start a new session (same model, harness and dialect)")
async def _new(app: App, arg: str) -> None:
    await app.replace_session()


@command("/resume", "/resume [ID]", "list recent sessions, or reopen one")
async def _resume(app: App, arg: str) -> None:
    from codemode.agent.rollout import SESSIONS_DIR, find_session, list_sessions, read_session
    from codemode.config import codemode_home

    sessions_dir = codemode_home() / SESSIONS_DIR
    if not arg:
        rows = list_sessions(sessions_dir)[:10]
        if not rows:
            _say(app, "no sessions recorded yet")
        for row in rows:
            _say(app, f"{row.id}  {row.model:<20} {row.dialect:<7} {row.first_prompt}")
        return
    recorded = read_session(find_session(sessions_dir, shlex.split(arg)[0]))
    await app.replace_session(recorded)


@command("/reasoning", "/reasoning", "show reasoning in full (the last one too), or collapse it")
async def _reasoning(app: App, arg: str) -> None:
    app.renderer.show_reasoning = not app.renderer.show_reasoning
    _say(app, f"reasoning: {'shown in full' if app.renderer.show_reasoning else 'collapsed'}")
    facts = app.session.model_facts if app.session is not None else None
    if app.session is not None and facts is not None and not facts.reasoning:
        _say(app, f"(the catalog says {app.session.model} does not reason: expect none)", "dim")
    if app.renderer.show_reasoning and app.renderer.last_reasoning:
        _say(app, app.renderer.last_reasoning, "dim italic")
