"""``python -m codemode.launch serve SOCKET PID [COMMAND]``: the warm server of
`interpreter` commands (``codemode.warm.start.serve``), given what commands import, how
one runs, and what a spare makes ready for each kind of command (``codemode.warm.spare``).
COMMAND: the name of the command that started it (its first spare's kind).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import ModuleType

# The kinds of command a spare is made ready for: Codex's code-mode host, started for
# every session and waited for, and a command that runs programs (`run`, `exec`) get a
# spare whose engine worker is booted already.
HOST = b"h"
PROGRAMS = b"p"
_PROGRAM_COMMANDS = (["run"], ["exec"])


def _prepare() -> None:
    """Import everything (``import_everything``: a command that imports one more module
    pays for it in every run), then rehearse what every run would repeat."""
    import_everything()
    _rehearse()


def import_everything() -> None:
    """Import every module of codemode (what any command could need) and the libraries
    commands load on first use (``LAZY_LIBRARIES``). Never runs a module's ``__main__``
    or the eval tasks' fixtures. Also what ``scripts/setup-runtime.sh`` runs with
    bytecode writing on, so that each of those modules is compiled once, at set-up."""
    import importlib
    import pkgutil

    import codemode
    from codemode.cli.root import load_command_modules

    load_command_modules()
    for name in LAZY_LIBRARIES:
        _try_import(importlib, name)
    for module in pkgutil.walk_packages(codemode.__path__, "codemode.", onerror=lambda _: None):
        if module.name.endswith("__main__") or module.name.startswith(_NOT_IMPORTED):
            continue
        _try_import(importlib, module.name)


def _rehearse() -> None:
    """Work every run of a kind would repeat, done once here for all of them: the
    installed version (a search of every folder on the path, ~5 ms; what `mcp-server`
    says in its first answer), the tools' JSON schemas, the C library the worker calls,
    the built-in command rules, whether bubblewrap works, and click's parse of each
    command's options (its first checks of abstract classes fill caches a fork then
    shares)."""
    from codemode.version import package_version
    from codemode.warm import worker

    package_version()  # (an upgrade changes it: the server ends on any change of code)
    worker.prepare()
    _try(_tool_schemas)
    _try(_complete_models)
    _try(_request_state_cipher)
    _try(_git_key_patterns)
    _try(_command_policy)
    _try(_confinement_probe)
    _try(_command_server_program)
    _try(_parse_each_command)


def _try(step: Callable[[], object]) -> None:
    try:
        step()
    except Exception:  # a rehearsal only: the run does it again and says what is wrong
        pass


def _tool_schemas() -> None:
    """The JSON schemas of the built-in tools' arguments and of `exec`'s and `wait`'s
    (built anew by pydantic on each call; ``codemode.tools.surfaces`` keeps them once
    found)."""
    from codemode.harnesses.program_tools import exec_tool, wait_tool
    from codemode.tools.builtin import builtin_registry
    from codemode.tools.surfaces import function_specs

    function_specs([*builtin_registry(), exec_tool(""), wait_tool()])


def _complete_models() -> None:
    """Build the pydantic models whose build was put off until their first use (a
    forward reference at class creation): the tools' results, the MCP SDK's settings and
    requests. Each run would build them again, a few ms apiece."""
    from pydantic import BaseModel

    pending = list(BaseModel.__subclasses__())
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if not model.__pydantic_complete__:
            try:
                model.model_rebuild()
            except Exception:  # a name it names is not defined yet: its first use says
                pass


def _request_state_cipher() -> None:
    """The MCP SDK's server seals request state under a key it makes when it is built
    (HKDF and AES-GCM): the cipher library's first use, ~1 ms of every `mcp-server`'s
    handshake, done here once (the key made here is dropped; each server makes its own)."""
    from mcp.server.request_state import RequestStateSecurity

    RequestStateSecurity.ephemeral()


def _git_key_patterns() -> None:
    """The git config keys that name files or programs, compiled by ``fnmatch`` as the
    sandbox's set-up matches them (its cache is per process: each `exec` compiled ~40
    patterns again, ~10 ms)."""
    import fnmatch

    from codemode.sandbox.git import git_named

    paths, programs = git_named._keys()
    for pattern in (*paths, *programs):
        fnmatch.fnmatchcase("", pattern)


def _command_policy() -> None:
    """The built-in command rules parsed and a command line judged by them: the shell
    grammar's first parse, and the rules' patterns compiled (caches keyed by the pattern
    alone), ~40 ms of the first confined command of every run. Only the installation's
    rules: a user's and a repository's are read by each run, as cold."""
    from pathlib import Path

    from codemode.sandbox.execpolicy.policy import Policy
    from codemode.sandbox.execpolicy.verdicts import PolicyContext

    nowhere = Path("/nonexistent")
    ctx = PolicyContext(cwd=nowhere, writable_roots=(nowhere,), home=nowhere, path="")
    Policy().evaluate("echo a | grep -c a > /dev/null && git status && ls -la; cat x", ctx)


# The PATH the server probes bubblewrap with (it is started without the caller's): where
# most systems keep it, so that most runs find the very programs it probed.
_USUAL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _confinement_probe() -> None:
    """Whether bubblewrap (with, as root, the helper that drops capabilities) works here:
    probed once (bubblewrap started, ~8 ms of the first confined command of every run).
    A run takes this verdict only while it would run the very same files; one whose
    PATH or cache folder finds others probes them itself (``bwrap.available``). A
    verdict that bubblewrap does not work is not kept: each run asks again, as cold."""
    from codemode.sandbox.confinement import bwrap, confine

    had = os.environ.get("PATH")
    os.environ["PATH"] = _USUAL_PATH if had is None else had
    try:
        confine.probe()
    finally:
        if had is None:
            del os.environ["PATH"]
        bwrap.forget_failures()


def _command_server_program() -> None:
    """The program a session's command server runs, read and compiled (~3 ms of the
    first confined command of every run). Read here, it is this installation's own
    text: the server ends when codemode's code changes."""
    from codemode.sandbox.server import server_program

    server_program.program()


def _parse_each_command() -> None:
    import click

    from codemode.cli.root import cli

    for name, command in cli.commands.items():
        try:
            with cli.make_context("interpreter", [name], resilient_parsing=True) as parent:
                command.make_context(name, [], parent=parent, resilient_parsing=True)
        except (click.ClickException, click.exceptions.Exit, OSError, ValueError):
            pass  # a command that wants arguments: its rehearsal parsed what it could


def _try_import(importlib: ModuleType, name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # a lean install, or a platform's module: the command says so
        pass


# Libraries the commands import inside their functions (so a cold `--help` stays fast),
# and the modules those libraries import only when first used (httpx its transport,
# anyio its event loop's backend, asyncio its thread pool): a module a run imports
# after the fork costs every run its import (httpcore alone: ~25 ms of each `exec`).
# tests/test_warm_imports.py runs the entry points after this preparation and fails
# on any module they still import. scripts/setup-runtime.sh compiles them all ahead
# (``import_everything``).
LAZY_LIBRARIES = (
    "asyncio", "concurrent.futures.thread", "httpx", "httpcore", "h11", "httpx_sse",
    "pydantic", "rich.console", "rich.logging", "prompt_toolkit", "mcp", "mcp.server.stdio",
    "anyio._backends._asyncio", "anyio.streams.stapled", "anyio.streams.tls",
    "tree_sitter", "tree_sitter_bash", "lark", "h2.connection", "pyseccomp",
)  # fmt: skip
# Fixtures, not code (the eval tasks' workspaces), and the V8 engine's binding, whose
# library is loaded by the engine worker that uses it.
_NOT_IMPORTED = ("codemode.eval.tasks",)


def _kind(argv: list[str]) -> bytes:
    if argv[1:2] == ["code-mode-host"]:
        return HOST
    return PROGRAMS if argv[1:2] in _PROGRAM_COMMANDS else b"c"


def _prepare_spare(kind: bytes) -> None:
    """In a spare, before it waits: for a code-mode host or a command that runs
    programs, its engine worker (with the defaults: the host's options, which Codex uses;
    `run`'s and `exec`'s engine and memory cap) booting now; a command that asks for
    another engine or cap has it discarded (``prestart.adopt``). Then, for every kind,
    the pages the run will write are copied now (``spare.own_pages``): otherwise a
    fork's first use of them costs its caller a few ms (a warm `mcp-server`'s handshake
    22 -> 16 ms), at the price of the spare's ~85 MB of its own while it waits."""
    from codemode.warm.spare import own_pages

    if kind in (HOST, PROGRAMS):
        from codemode.js_runtime import prestart

        if kind == HOST:
            from codemode.codex_host.serve.start import host_options
            from codemode.codex_host.session.runtime import globals_js
            from codemode.js_runtime.setup_head import head

            # Read now, not by each session: the JavaScript its isolates begin with.
            head()
            globals_js()
            defaults = host_options([])
            assert defaults is not None
            engine, memory_mb = defaults.engine, defaults.memory_mb
        else:
            import dataclasses

            from codemode.assembly.options import SessionSpec
            from codemode.js_runtime.models import AGENT_MEMORY_MB

            spec = {f.name: f.default for f in dataclasses.fields(SessionSpec)}
            engine, memory_mb = str(spec["default_engine"]), AGENT_MEMORY_MB
        prestart.spawn_early(engine, memory_mb * 1024 * 1024)
    own_pages()


def _run(args: list[str]) -> int:
    from codemode.cli import main as cold

    if args[:1] == ["code-mode-host"]:
        from codemode.launch.host import serve_host

        serve_host(args)  # returns only where click must read the options
    elif args[:1] not in _PROGRAM_COMMANDS:
        from codemode.js_runtime import prestart

        prestart.discard_early()  # a spare's worker, taken by a command that runs none
    cold(args)
    return 0


def main(argv: list[str]) -> int:
    from codemode.warm import start

    if len(argv) not in (2, 3) or not argv[1].isdigit():
        print("usage: python -m codemode.launch serve SOCKET PID [COMMAND]", file=sys.stderr)
        return 2
    idle = float(os.environ.get(start.IDLE_ENV, "0") or 0)
    first = _kind(["", *argv[2:3]])
    return start.serve(argv[0], int(argv[1]), _prepare, _run, idle, kind=_kind,
                       prepare_spare=_prepare_spare, first_kind=first)  # fmt: skip
