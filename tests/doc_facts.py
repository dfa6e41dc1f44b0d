"""The facts the documentation states, read from the code.

A documented default, cap, limit or exit status is written in README.md or docs/*.md as
``<!--fact:NAME-->VALUE<!--/fact-->`` (the comments are invisible when rendered; a value
shown as code keeps its backticks inside the marker: ``<!--fact:N-->`stdio`<!--/fact-->``,
never the marker inside the backticks, where it would be shown) and
``FACTS[NAME]`` returns the code's own value, read from the constant or default that
decides it, never typed again here. ``tests/test_docs_facts.py`` compares the two, so
the documentation cannot drift from the program: a changed default fails the test until
the text says the new one.

Values are compared as text after ``render``: numbers with thousands separators
(``60,000``) or without, booleans as ``true``/``false``, strings as they are.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def _default(function: Callable[..., Any], parameter: str) -> Any:
    """The default of ``parameter`` in ``function``'s signature."""
    return inspect.signature(function).parameters[parameter].default


def _click_default(module: str, command: str, option: str) -> Any:
    """The default of a click command's option (``--timeout``), from its definition."""
    import importlib

    cmd = getattr(importlib.import_module(module), command)
    for param in cmd.params:
        if option in getattr(param, "opts", ()):
            return param.default
    raise KeyError(f"{module}.{command} has no option {option}")


def _codex_host(option: str) -> Any:
    return _click_default("codemode.cli.codex_host", "code_mode_host", option)


def _catalog(provider: str, field: str) -> Any:
    """A field of a provider in the catalog (``providers/catalog.json``); "none" when
    the provider does not set it."""
    return _catalog_file("catalog.json")["providers"][provider].get(field, "none")


def _constant(module: str, name: str) -> Any:
    """A module-level constant, read where the code defines it."""
    import importlib

    return getattr(importlib.import_module(module), name)


def _limits(field: str) -> Any:
    """A default of the runtime's ``Limits`` (what ToolHost and the entry points start from)."""
    from codemode.js_runtime import Limits

    return getattr(Limits(), field)


def _tool_host(parameter: str) -> Any:
    from codemode.host import ToolHost

    return _default(ToolHost.__init__, parameter)


def _config_default(field: str) -> Any:
    from codemode.config import Config

    return _field_default(Config, field)


def _field_default(model: Any, name: str) -> Any:
    """The default of a pydantic model's or a dataclass's field ``name``."""
    import dataclasses

    if dataclasses.is_dataclass(model):
        return next(f.default for f in dataclasses.fields(model) if f.name == name)
    return model.model_fields[name].default


def _same(*values: Any) -> Any:
    """One value several places decide alike; a disagreement is shown as all of them,
    which matches no documented value."""
    return values[0] if len(set(values)) == 1 else values


def _sandbox(name: str) -> Any:
    """A sandbox default, the same in the config file and in ``SandboxSettings`` (what
    ``run`` and a ``ToolHost`` without ``sandbox=`` use)."""
    from codemode.sandbox.settings import SandboxSettings

    return _same(_config_default(name), _field_default(SandboxSettings, name))


def _sandbox_option(name: str) -> Any:
    from codemode.sandbox.settings import SandboxOptions

    return _field_default(SandboxOptions, name)


def _agent_dialect() -> str:
    return "code mode" if _config_default("code_mode") else "classic"


def _agent_engine() -> Any:
    from codemode.assembly.options import SessionSpec

    return _field_default(SessionSpec, "default_engine")


def _run(option: str) -> Any:
    return _click_default("codemode.cli.run", "run", option)


def _corpus_commands() -> int:
    """Command lines in the execpolicy corpus, all sections."""
    import tomllib
    from pathlib import Path

    path = Path(__file__).parent / "data" / "policy_corpus.toml"
    corpus = tomllib.loads(path.read_text(encoding="utf-8"))
    return sum(len(section["commands"]) for section in corpus.values())


def _catalog_file(name: str) -> Any:
    """One of the shipped provider catalog's files."""
    import json
    from importlib import resources

    return json.loads(resources.files("codemode.providers").joinpath(name).read_text())


def _mcp_config(name: str) -> Any:
    from codemode.mcp.config import McpServerConfig

    return _field_default(McpServerConfig, name)


WARM_SERVER = "codemode.warm.server"
SPIN = "codemode.js_runtime.spin"
WORKER = "codemode.js_runtime.worker"
PARENT = "codemode.js_runtime.worker_process"
ISOLATES = "codemode.js_runtime.isolates"


def _us(module: str, name: str) -> float:
    return round(_constant(module, name) * 1e6, 3)


def _ms(module: str, name: str) -> float:
    return round(_constant(module, name) * 1e3, 3)


WALK = "codemode.tools.walk_bounds"

FACTS: dict[str, Callable[[], Any]] = {
    "warm.idle_min": lambda: _constant(WARM_SERVER, "IDLE_S") / 60,
    "warm.max_runs": lambda: _constant(WARM_SERVER, "MAX_RUNS"),
    "warm.lost_status": lambda: _constant("codemode.warm.client", "LOST_STATUS"),
    "warm.quiet_s": lambda: _constant(WARM_SERVER, "QUIET_S"),
    # interpreter code-mode-host (docs/codex-host.md)
    "codex_host.listen": lambda: _codex_host("--listen"),
    "codex_host.engine": lambda: _codex_host("--engine"),
    "codex_host.timeout_s": lambda: _codex_host("--timeout"),
    "codex_host.memory_mb": lambda: _codex_host("--memory-mb"),
    "codex_host.max_sessions": lambda: _codex_host("--max-sessions"),
    "codex_host.max_cells": lambda: _codex_host("--max-cells"),
    "codex_host.max_connection_cells": lambda: _codex_host("--max-cells-per-connection"),
    "codex_host.max_connections": lambda: _codex_host("--max-connections"),
    # the searches' walk (docs/file-tools.md)
    "walk.folder_entries": lambda: _constant(WALK, "MAX_FOLDER_ENTRIES"),
    "walk.total_entries": lambda: _constant(WALK, "MAX_WALK_ENTRIES"),
    "walk.held_entries": lambda: _constant(WALK, "MAX_HELD_ENTRIES"),
    # the engine worker's pipe (docs/engine-host.md)
    "engine.spin_us": lambda: _same(_us(WORKER, "_SPIN_S"), _us(PARENT, "SPIN_S")),
    "engine.preempted_us": lambda: _us(SPIN, "_PREEMPTED_S"),
    "engine.busy_check_ms": lambda: _ms(SPIN, "_BUSY_CHECK_S"),
    "engine.near_ms": lambda: _ms(SPIN, "_NEAR_S"),
    "engine.block_us": lambda: _us(PARENT, "BLOCK_S"),
    "engine.flush_ms": lambda: _ms(WORKER, "_FLUSH_S"),
    "engine.park_s": lambda: _constant(WORKER, "_PARK_S"),
    "engine.prime_after_ms": lambda: _ms(ISOLATES, "PRIME_AFTER_S"),
    "engine.stop_grace_ms": lambda: _ms(PARENT, "STOP_GRACE_S"),
    # interpreter mcp-server
    "mcp_server.result_chars": lambda: _constant("codemode.mcp.server", "RESULT_FIELD_CHARS"),
    "mcp_server.preview_chars": lambda: _constant("codemode.mcp.server", "TEXT_PREVIEW_CHARS"),
    "mcp_server.max_running": lambda: _constant("codemode.mcp.server", "MAX_RUNNING"),
    "mcp_server.memory_mb": lambda: _constant("codemode.commands.mcp", "MEMORY_MB"),
    "config.exec_timeout_s": lambda: _config_default("exec_timeout_s"),
    # interpreter acp
    "config.acp_max_sessions": lambda: _config_default("acp_max_sessions"),
    "acp.session_limit_code": lambda: _constant("codemode.acp.table", "SESSION_LIMIT"),
    # the runtime's Limits and ToolHost (docs/embedding.md)
    "limits.timeout_s": lambda: _limits("timeout_s"),
    "limits.memory_mb": lambda: _limits("memory_mb"),
    "limits.max_tool_calls": lambda: _limits("max_tool_calls"),
    "limits.output_chars": lambda: _limits("output_chars"),
    "tool_host.engine": lambda: _tool_host("engine"),
    # local model servers' output caps (docs/local-models.md)
    "catalog.llamacpp.max_output_tokens": lambda: _catalog("llamacpp", "max_output_tokens"),
    "catalog.ollama.max_output_tokens": lambda: _catalog("ollama", "max_output_tokens"),
    "catalog.lmstudio.max_output_tokens": lambda: _catalog("lmstudio", "max_output_tokens"),
    "catalog.vllm.max_output_tokens": lambda: _catalog("vllm", "max_output_tokens"),
    # interpreter doctor, and the first minute without a provider (docs/doctor.md)
    "doctor.exit_ok": lambda: _constant("codemode.doctor.exit_status", "EXIT_OK"),
    "doctor.exit_broken": lambda: _constant("codemode.doctor.exit_status", "EXIT_BROKEN"),
    "doctor.exit_not_set_up": lambda: _constant("codemode.doctor.exit_status", "EXIT_NOT_SET_UP"),
    "doctor.min_node_major": lambda: _constant("codemode.doctor.checks", "MIN_NODE_MAJOR"),
    "provider_hints.max_suggestions": lambda: _constant(
        "codemode.config.provider_hints", "MAX_SUGGESTIONS"),
    "exec.exit_usage": lambda: _constant("codemode.commands.exec", "EXIT_USAGE"),
    "interactive.exit_usage": lambda: _constant("codemode.tui.app", "EXIT_USAGE"),
    # README's defaults per entry point, and the pages carved out of the README
    "codex_host.max_tool_calls": lambda: _constant(
        "codemode.codex_host.session.runtime", "SessionLimits"
    )._field_defaults["max_tool_calls"],
    "codex_host.delegate_capacity": lambda: _constant(
        "codemode.codex_host.framed.protocol", "CAPACITY"),
    "codex_host.delegate_capacity_granted": lambda: _constant(
        "codemode.codex_host.framed.protocol", "CAPACITY_GRANTED"),
    "codex_host.queued_notifications": lambda: _constant(
        "codemode.codex_host.grpc.session", "QUEUED_NOTIFICATIONS"),
    "codex_host.held_for_client_bytes": lambda: _constant(
        "codemode.codex_host.session.limits", "HELD_FOR_CLIENT"),
    "codex_host.framed_max_elements": lambda: _constant(
        "codemode.process.json_cost", "MAX_ELEMENTS"),
    "codex_host.catalogs_for_client_bytes": lambda: _constant(
        "codemode.codex_host.session.limits", "CATALOGS_FOR_CLIENT"),
    "codex_host.catalog_revisions_kept": lambda: _constant(
        "codemode.codex_host.session.catalog", "KEPT"),
    "codex_host.output_for_client_bytes": lambda: _constant(
        "codemode.codex_host.session.limits", "OUTPUT_FOR_CLIENT"),
    "codex_host.output_each_bytes": lambda: _constant(
        "codemode.codex_host.session.limits", "OUTPUT_EACH"),
    "codex_host.max_unsent_bytes": lambda: _constant(
        "codemode.codex_host.wire.h2_config", "MAX_UNSENT"),
    "codex_host.items_kept": lambda: _constant(
        "codemode.codex_host.session.execution", "ITEMS_KEPT"),
    "codex_host.unacknowledged_kept": lambda: _constant(
        "codemode.codex_host.grpc.session", "UNACKNOWLEDGED_KEPT"),
    "codex_host.store_chars": lambda: _constant(
        "codemode.codex_host.session.store", "STORE_CHARS"),
    "codex_host.output_half_bytes": lambda: _constant(
        "codemode.codex_host.session.bounded_output", "HALF"),
    "mcp_server.max_line_bytes": lambda: _constant("codemode.mcp.stdio_wire", "MAX_LINE"),
    "mcp_server.max_json_elements": lambda: _constant(
        "codemode.process.json_cost", "MAX_ELEMENTS"),
    "skills.max_entries_read": lambda: _constant(
        "codemode.skills.discovery", "MAX_ENTRIES_READ"),
    "skills.max_skills": lambda: _constant("codemode.skills.discovery", "MAX_SKILLS"),
    "skills.max_helpers": lambda: _constant("codemode.skills.discovery", "MAX_HELPERS"),
    "mcp_server.engine": lambda: _constant("codemode.commands.mcp", "SERVER_ENGINE"),
    "providers.count": lambda: len(_catalog_file("catalog.json")["providers"]),
    "providers.models": lambda: sum(len(m) for m in _catalog_file("models.json").values()),
    # the agent: interpreter exec and the interactive session
    "agent.dialect": _agent_dialect,
    "agent.max_turns": lambda: _config_default("max_turns"),
    "agent.engine": _agent_engine,
    "agent.memory_mb": lambda: _constant("codemode.js_runtime.models", "AGENT_MEMORY_MB"),
    "agent.output_chars": lambda: _constant("codemode.assembly.session", "AGENT_OUTPUT_CHARS"),
    "exec.exit_interrupted": lambda: _constant("codemode.commands.exec", "EXIT_INTERRUPTED"),
    "config.exec_yield_time_s": lambda: _config_default("exec_yield_time_ms") / 1000,
    "sandbox.mode": lambda: _sandbox("sandbox_mode"),
    "sandbox.approval": lambda: _sandbox("approval_policy"),
    "sandbox.backend": lambda: _sandbox_option("backend"),
    # interpreter run
    "run.engine": lambda: _run("--engine"),
    "run.timeout_s": lambda: _run("--timeout"),
    "run.memory_mb": lambda: _run("--memory"),
    "run.max_tool_calls": lambda: _run("--max-tool-calls"),
    "run.output_chars": lambda: _constant("codemode.cli.run", "RUN_OUTPUT_CHARS"),
    "run.exit_limit": lambda: _constant("codemode.commands.run", "EXIT_LIMIT"),
    "run.exit_interrupted": lambda: _constant("codemode.cli", "EXIT_INTERRUPTED"),
    # the tools and their inputs
    "grep.default_lines": lambda: _field_default(
        _constant("codemode.tools.grep", "GrepArgs"), "max_results"
    ),
    "grep.max_lines": lambda: _constant("codemode.tools.grep", "MAX_GREP_MATCHES"),
    "read.max_mb": lambda: _constant("codemode.tools.store", "MAX_READ_BYTES") / 2**20,
    "undo.max_file_mb": lambda: _constant("codemode.tui.snapshots", "MAX_FILE_BYTES") / 2**20,
    "execpolicy.corpus_commands": _corpus_commands,
    "mcp.startup_timeout_s": lambda: _mcp_config("startup_timeout_s"),
    "mcp.tool_timeout_s": lambda: _mcp_config("tool_timeout_s"),
}


def render(value: Any) -> set[str]:
    """The ways ``value`` may be written in the documentation."""
    if isinstance(value, bool):
        return {"true", "false"} & {str(value).lower()}
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return {str(value), f"{value:,}"}
    return {str(value)}
