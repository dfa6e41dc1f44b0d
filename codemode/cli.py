"""The `interpreter` command line: argument handling only; the work lives elsewhere.

Heavy modules (JavaScript engines, pydantic models, HTTP clients) are imported inside
the commands, so `interpreter --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if __name__ != "__main__" and sys.argv[1:2] == ["run"]:
    # Before anything heavy: `interpreter run`'s engine worker boots meanwhile.
    from codemode.js_runtime.early import prestart_for

    prestart_for(sys.argv[1:])

import click

from codemode.batch.cli_options import BatchCommand, batch_options, refuse_without_repos
from codemode.sandbox.cli_options import configured_sandbox, sandbox_options

ENGINE_CHOICES = ("quickjs", "v8")


def cwd_option(help: str) -> Any:
    """``-C/--cwd/--cd DIR`` (an existing directory, default: the current one)."""
    return click.option(
        "-C",
        "--cwd",
        "--cd",
        "cwd",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=".",
        help=help,
    )


_GROUP_OVERRIDES = "codemode.group_overrides"


def _with_group_overrides(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """``-c`` given before the command name, then the command's own (which win)."""
    return (*ctx.meta.get(_GROUP_OVERRIDES, ()), *value)


def config_option() -> Any:
    """``-c/--config KEY=VALUE`` (repeatable): override a key of the config file."""
    return click.option(
        "-c",
        "--config",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_with_group_overrides,
        help="Override a config key (dotted for tables; VALUE is TOML or a plain string).",
    )


def load_config_or_usage(overrides: tuple[str, ...] | list[str]) -> Any:
    """The configuration, or a usage error (exit 2) naming what is wrong with it."""
    from codemode.config import ConfigError, load_config

    try:
        return load_config(list(overrides))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


class _SessionGroup(click.Group):
    """A group whose first word is a subcommand if it names one, else the PROMPT of an
    interactive session (``interpreter "fix the bug"``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        attr = "_protected_args" if hasattr(ctx, "_protected_args") else "protected_args"
        head: list[str] = getattr(ctx, attr)
        if head and self.get_command(ctx, head[0]) is None:
            words = [*head, *ctx.args]
            if len(words) == 1:
                from codemode.cli_hints import near_names

                close = [n for n in near_names(words[0], self.list_commands(ctx))
                         if not n.startswith(words[0]) or len(words[0]) >= 3]
                if close and words[0].isalpha():
                    offer = " or ".join(f"`interpreter {n}`" for n in close[:3])
                    raise click.UsageError(
                        f"{words[0]!r} is not a command; did you mean {offer}? (To ask "
                        "the model, start `interpreter` and type it at the prompt.)"
                    )
            if any(w.startswith("-") for w in words[1:]):
                raise click.UsageError(
                    "put options before the PROMPT: interpreter [OPTIONS] [PROMPT]"
                )
            ctx.meta["codemode.prompt"] = " ".join(words)
            setattr(ctx, attr, [])
            ctx.args = []
            return []
        return rest


@click.group(
    cls=_SessionGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    subcommand_metavar="[PROMPT] | COMMAND [ARGS]...",
)
@click.version_option(package_name="codemode", prog_name="interpreter")
@click.pass_context
def cli(ctx: click.Context, **kw: Any) -> None:
    """codemode: a coding agent where the model writes JavaScript against your tools.

    Without a command, starts an interactive session in the workspace (PROMPT, if
    given, is its first message). /help inside lists what it can do.
    """
    if ctx.invoked_subcommand is None:
        _run_interactive(prompt=ctx.meta.get("codemode.prompt"), **kw)
        return
    # `interpreter -c KEY=VALUE COMMAND`: the overrides apply to the command too (its
    # -c option adds them, see config_option); other session options before a command
    # would be silently lost, so they are an error.
    ctx.meta[_GROUP_OVERRIDES] = tuple(kw.get("overrides") or ())
    given = [
        max(p.opts, key=len)
        for p in ctx.command.params
        if p.name in kw
        and p.name != "overrides"
        and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise click.UsageError(
            f"put {', '.join(given)} after the command name: "
            f"interpreter {ctx.invoked_subcommand} [OPTIONS]"
        )


@cli.command(cls=BatchCommand, context_settings={"ignore_unknown_options": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.argument("args", nargs=-1)
@click.option(
    "--engine",
    type=click.Choice(ENGINE_CHOICES),
    default="quickjs",
    show_default=True,
    help="quickjs: starts in ~0.4 ms; v8: JIT-compiled, for CPU-heavy scripts.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Wall-clock limit in seconds, measured outside the engine (the script's "
    "engine process is killed when it runs out).",
)
@click.option(
    "--memory",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Memory cap in MB: the isolate's own, and an OS cap on its engine process "
    "(typed arrays included).",
)
@click.option(
    "--max-tool-calls",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Tool calls allowed before the script is stopped (counted outside the engine).",
)
@cwd_option("Workspace the tools work in (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@click.option("-v", "--verbose", is_flag=True, help="Show each tool call on stderr.")
@config_option()
@sandbox_options
@batch_options
def run(
    script: str,
    args: tuple[str, ...],
    engine: str,
    timeout: float,
    memory: int,
    max_tool_calls: int,
    cwd: Path,
    as_json: bool,
    verbose: bool,
    overrides: tuple[str, ...],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
    repos: tuple[Path, ...],
    **batch: Any,
) -> None:
    """Run SCRIPT (a .js file, or - for stdin) against the tools, without a model.

    ARGS after the script are available to it as the array `argv` (put `--` before
    them if one starts with a dash). The configured MCP servers that SCRIPT names
    (`tools.SERVER.tool(...)`) are started and their tools offered.
    Exit status: 0 done, 1 script error, 2 usage error, 3 a limit was hit.

    With --repos, SCRIPT runs in each repository in parallel, confined to it, and
    writes a JSON Lines report; exit status 0 all done, 1 any failed.
    """
    from codemode.config_file import ConfigError, raw_config

    try:
        raw = raw_config(overrides)[1]
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    # The config file's sandbox_mode, approval_policy and [sandbox], flags overriding.
    sandbox = configured_sandbox(raw, sandbox_mode, approval_policy, full_auto)
    if not repos:
        from codemode.js_runtime.worker_process import POOL

        # The engine worker boots while the rest of the command imports.
        POOL.prestart(engine, memory * 1024 * 1024)
    from codemode.js_runtime.models import Limits
    from codemode.run import UnreadableScript, read_script, run_script

    try:
        source = read_script(script)
    except UnreadableScript as exc:
        raise click.UsageError(str(exc)) from None
    servers = _mcp_servers_named_in(source, overrides, raw)
    if repos:
        if servers:
            raise click.UsageError(
                "MCP servers are not started for batch runs (--repos), and the script "
                f"uses {', '.join(sorted(servers))}"
            )
        from codemode.batch.command import run_batch_command
        from codemode.sandbox.settings import SandboxSettings

        if as_json:
            raise click.UsageError("--json is for single runs; a batch writes --report")
        caps = {"timeout": timeout, "memory": memory, "max_tool_calls": max_tool_calls}
        sys.exit(
            run_batch_command(
                source,
                args,
                engine=engine,
                repos=repos,
                sandbox=SandboxSettings.model_validate(sandbox),
                verbose=verbose,
                **caps,
                **batch,
            )
        )
    refuse_without_repos(batch)

    limits = Limits(
        timeout_s=timeout,
        memory_mb=memory,
        max_tool_calls=max_tool_calls,
        output_chars=10_000_000,
    )
    try:
        status = run_script(
            source,
            mcp_servers=servers,
            cwd=cwd,
            engine=engine,
            limits=limits,
            argv=list(args),
            as_json=as_json,
            verbose=verbose,
            sandbox=sandbox,
            dry_run=bool(batch.get("dry_run")),
            filename="stdin" if script == "-" else script,
        )
    except ConfigError as exc:  # a bad [mcp_servers] table
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


def _mcp_servers_named_in(
    source: str, overrides: tuple[str, ...], raw: dict[str, Any]
) -> dict[str, Any]:
    """The ``[mcp_servers.*]`` tables of the servers ``source`` names, validated. The raw
    file (``raw``) is read first: validating needs pydantic (~50 ms), which most scripts
    can skip."""
    from codemode.mcp.referenced import servers_named_in

    tables = raw.get("mcp_servers")
    named = servers_named_in(source, tables) if isinstance(tables, dict) else {}
    if not named:
        return {}
    validated = load_config_or_usage(overrides).mcp_servers
    return {name: validated[name] for name in named}


@cli.command()
@click.option("--dts", is_flag=True, help="Print TypeScript declarations (the code dialect).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON schemas (the classic dialect).")
@config_option()
def tools(dts: bool, as_json: bool, overrides: tuple[str, ...]) -> None:
    """List the tools: the built-in ones and those of the configured MCP servers
    (started to ask them; one that fails is reported on stderr)."""
    from codemode.config import ConfigError, codemode_home
    from codemode.mcp.referenced import add_servers
    from codemode.tools.builtin import builtin_registry

    notices: list[str] = []
    tables = load_config_or_usage(overrides).mcp_servers
    try:
        registry = add_servers(builtin_registry(), tables, codemode_home() / "logs", notices)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        for notice in notices:
            click.echo(f"warning: {notice}", err=True)
        _print_tools(registry, dts=dts, as_json=as_json)
    finally:
        registry.close()


def _print_tools(registry: Any, *, dts: bool, as_json: bool) -> None:
    from codemode.tools.registry import code_name

    if dts:
        from codemode.tools.typescript import typescript_declarations

        click.echo(typescript_declarations(registry, standalone=True), nl=False)
    elif as_json:
        import json

        schemas = [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.args_model.model_json_schema(),
            }
            for t in registry
        ]
        click.echo(json.dumps(schemas, indent=2))
    else:
        width = max(len(code_name(t.name)) for t in registry)
        for t in registry:
            first = (t.description.strip().splitlines() or [""])[0]
            click.echo(f"{code_name(t.name).ljust(width)}  {first}")


def session_options(fn: Any) -> Any:
    """The options every agent command shares (exec, resume, and later the interactive one)."""
    options = [
        click.option("-m", "--model", help="Model name, as the provider spells it."),
        click.option("--provider", help="Provider from the catalog or [model_providers.NAME]."),
        click.option(
            "--code-mode/--classic",
            "code_mode",
            default=None,
            help="Code dialect (one exec tool running JavaScript) or classic tool calls.",
        ),
        click.option(
            "--harness",
            help="Harness (prompt and tool surface; `interpreter harness list`); default: "
            "the one of the provider's model family (claude-code for Anthropic, kimi-code "
            "for Kimi, qwen-code for Qwen), else native.",
        ),
        cwd_option("Workspace (default: current directory)."),
        click.option(
            "--max-turns",
            type=click.IntRange(min=1),
            help="Most model requests in one turn before it stops.",
        ),
        config_option(),
        click.option("--json", "as_json", is_flag=True, help="Print JSON Lines events."),
        click.option("--experimental-json", "as_json", is_flag=True, hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return sandbox_options(fn)


def _read_prompt(prompt: str | None) -> str | None:
    if prompt == "-" or (prompt is None and not sys.stdin.isatty()):
        # Bytes that are not UTF-8 become U+FFFD: a prompt is text for a model, and
        # neither a traceback nor an unencodable request helps.
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    return prompt


def _run_agent(**kwargs: Any) -> None:
    from codemode.agent.exec import ExecOptions, UsageProblem, run_exec

    try:
        status = run_exec(ExecOptions(**kwargs))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


def codex_exec_options(fn: Any) -> Any:
    """The Codex ``exec`` options the Codex SDK passes (see codemode/agent/codex_compat.py)."""
    options = [
        click.option(
            "--add-dir",
            "add_dirs",
            multiple=True,
            type=click.Path(exists=True, file_okay=False, path_type=Path),
            help="Another directory the tools may write in (repeatable).",
        ),
        click.option(
            "--skip-git-repo-check",
            is_flag=True,
            help="Accepted for Codex compatibility; codemode never requires a git repository.",
        ),
        click.option(
            "--output-schema",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="JSON Schema the final answer must satisfy (it is checked, with one retry).",
        ),
        click.option(
            "-i",
            "--image",
            "images",
            multiple=True,
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            help="Attach an image to the prompt (repeatable).",
        ),
        click.option("--last", is_flag=True, help="With resume: continue the newest session."),
        # Passed by some SDK versions; nothing to do with them here.
        click.option("--thread-source", hidden=True),
        click.option("--cyber-access-program", hidden=True),
        click.option("--color", hidden=True),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@cli.command("exec")
@click.argument("args", nargs=-1)
@session_options
@codex_exec_options
@click.option(
    "--replay",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Replay the model side of a recorded session (no network); tools run for real.",
)
def exec_(
    args: tuple[str, ...],
    replay: Path | None,
    overrides: tuple[str, ...],
    add_dirs: tuple[Path, ...],
    images: tuple[Path, ...],
    last: bool,
    skip_git_repo_check: bool,
    thread_source: str | None,
    cyber_access_program: str | None,
    color: str | None,
    **kw: Any,
) -> None:
    """Run PROMPT to completion without asking anything: exec [PROMPT], or
    exec resume SESSION_ID [PROMPT] (or exec resume --last [PROMPT]) to continue a session.
    A PROMPT of -, or none with stdin not a terminal, is read from stdin.

    Progress goes to stderr, the final answer to stdout. Exit status: 0 done,
    1 the turn failed, 2 usage or configuration error, 130 interrupted.
    """
    resume: str | None = None
    if args[:1] == ("resume",) and (len(args) > 1 or last):
        if last:
            resume, rest = "", args[1:]
        else:
            resume, rest = args[1], args[2:]
    else:
        if last:
            raise click.UsageError("--last goes with resume: exec resume --last [PROMPT]")
        rest = args
    if len(rest) > 1:
        raise click.UsageError(f"too many arguments: {' '.join(rest[1:])!r} (quote the PROMPT)")
    prompt = rest[0] if rest else None
    if replay is None:
        prompt = _read_prompt(prompt)
        if resume is not None and prompt is None:
            raise click.UsageError("pass a PROMPT to continue the session with")
    _run_agent(
        prompt=prompt,
        replay=replay,
        resume=resume,
        overrides=list(overrides),
        writable_roots=list(add_dirs),
        images=list(images),
        **kw,
    )


@cli.command()
@click.argument("args", nargs=-1)
@click.option("--last", is_flag=True, help="Continue the most recent session.")
@session_options
def resume(args: tuple[str, ...], last: bool, overrides: tuple[str, ...], **kw: Any) -> None:
    """Continue a recorded session: resume SESSION_ID [PROMPT] or resume --last [PROMPT].

    The session keeps its file, model and dialect unless options override them. Without
    a PROMPT, in a terminal, the session reopens interactively.
    """
    if last:
        if len(args) > 1:
            raise click.UsageError("with --last, pass at most a PROMPT")
        ref, prompt = "", (args[0] if args else None)
    else:
        if not args:
            raise click.UsageError("pass a SESSION_ID or --last")
        ref, prompt = args[0], (args[1] if len(args) > 1 else None)
        if len(args) > 2:
            raise click.UsageError("too many arguments: resume SESSION_ID [PROMPT]")
    if prompt is None and sys.stdin.isatty():
        if kw.pop("as_json"):
            raise click.UsageError("--json needs a PROMPT (it is for non-interactive runs)")
        _run_interactive(
            prompt=None,
            resume=ref,
            overrides=overrides,
            **kw,
        )
    prompt = _read_prompt(prompt)
    if prompt is None:
        raise click.UsageError("pass a PROMPT to continue with (or run it in a terminal)")
    _run_agent(prompt=prompt, resume=ref, overrides=list(overrides), **kw)


@cli.command()
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many sessions to list.",
)
def sessions(limit: int) -> None:
    """List recorded sessions, newest first (ids for `interpreter resume`)."""
    from codemode.agent.rollout import SESSIONS_DIR, list_sessions
    from codemode.config import codemode_home

    rows = list_sessions(codemode_home() / SESSIONS_DIR)[:limit]
    if not rows:
        click.echo("no sessions recorded yet", err=True)
    for row in rows:
        click.echo(
            f"{row.id}  {row.model:<24} {row.dialect:<7} {row.cwd or '?'}  {row.first_prompt}"
        )


@cli.command()
@config_option()
def providers(overrides: tuple[str, ...]) -> None:
    """List the model providers: the built-in catalog plus your [model_providers].

    KEY says whether the key variable is set in this environment; * marks the
    configured model_provider.
    """
    from codemode.providers.listing import providers_table

    config = load_config_or_usage(overrides)
    click.echo(providers_table(config.model_providers, config.model_provider))


@cli.command()
@config_option()
@click.argument("provider")
def models(overrides: tuple[str, ...], provider: str) -> None:
    """List the catalog's models of PROVIDER, with context window, reasoning and tool use."""
    from codemode.providers.catalog import _catalog, provider_models
    from codemode.providers.listing import models_table

    if not provider_models(provider):
        from codemode.harnesses.repair import closest_name

        if provider in _catalog() or provider in load_config_or_usage(overrides).model_providers:
            click.echo(f"the catalog lists no models for {provider!r} (a local server: ask "
                       "it, e.g. GET /v1/models)", err=True)
            raise click.exceptions.Exit(1)
        hint = closest_name(provider, list(_catalog()))
        raise click.UsageError(
            f"unknown provider {provider!r}{f' (did you mean {hint}?)' if hint else ''}; "
            "`interpreter providers` lists them"
        )
    click.echo(models_table(provider))


@cli.group()
def policy() -> None:
    """Execpolicy: how commands are judged before they run."""


@policy.command("check", context_settings={"allow_interspersed_args": False})
@click.option(
    "--rules",
    "rules_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A .rules file to load besides the built-in, user and repository rules (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the evaluation as JSON.")
@cwd_option("Workspace the command would run in (default: current directory).")
@click.argument("command", nargs=-1, required=True)
def policy_check(
    rules_files: tuple[Path, ...], as_json: bool, cwd: Path, command: tuple[str, ...]
) -> None:
    """Print the decision for COMMAND (allow, prompt, forbidden, or unmatched), the simple
    command and rule that decided it, and the justification.

    COMMAND is one shell command line (quote it) or an argv after `--`:
    `interpreter policy check -- git push --force`.

    Exit status: 0 allow, 10 unmatched, 20 prompt, 30 forbidden, 2 rules that do not load.
    """
    from codemode.sandbox.check_cli import EXIT_STATUS, evaluate, render
    from codemode.sandbox.rules import RulesError

    try:
        ev, notices = evaluate(command, cwd=cwd, rules_files=rules_files)
    except RulesError as exc:
        click.echo(f"interpreter policy check: error: {exc}", err=True)
        sys.exit(2)
    for notice in notices:
        click.echo(f"interpreter policy check: notice: {notice}", err=True)
    click.echo(render(ev, as_json=as_json))
    sys.exit(EXIT_STATUS[ev.decision])


@cli.command("apply-patch")
@click.argument("patch", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@cwd_option("Directory the patch's paths are relative to, and the only one it may change.")
def apply_patch(patch: str, cwd: Path) -> None:
    """Apply PATCH (a file, or - for stdin, the default) to the files under --cwd.

    PATCH is in the apply_patch format (*** Begin Patch ... *** End Patch) or a unified
    diff. It applies completely or not at all. Prints one line per file (A added,
    M modified, D deleted, R old -> new renamed) and exits 0; on failure prints why to
    stderr and exits 1, with no file changed.
    """
    from codemode.tools.patch.command import run_apply_patch_command

    sys.exit(run_apply_patch_command(patch, cwd.resolve()))


@policy.command("confinement")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def policy_confinement(as_json: bool) -> None:
    """Which confinement backends work on this machine, and which promises each keeps."""
    from codemode.sandbox.confine import probe
    from codemode.sandbox.promises import promises

    table = promises()
    if as_json:
        import json

        click.echo(json.dumps({"backends": probe().to_json(),
                               "promises": {p.key: p.to_json() for p in table}}, indent=2))
        return
    for name, why in probe().to_json().items():
        click.echo(f"{name:<10}  {'works' if why is None else 'unavailable: ' + why}")
    for backend in ("bubblewrap", "landlock"):
        click.echo(f"\n{backend}:")
        for p in table:
            why = getattr(p, backend)
            click.echo(f"  {'kept' if why is None else 'NOT KEPT'}  {p.text}")
            if why is not None:
                click.echo(f"            {why}")


# --- skills -----------------------------------------------------------------------


@cli.group()
def skills() -> None:
    """Skills: folders with a SKILL.md in .agents/skills/ (repository) and ~/.agents/skills/."""


@skills.command("list")
@cwd_option("Where to look from (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def skills_list(cwd: Path, as_json: bool) -> None:
    """Show the skills found, where from, and any SKILL.md that could not be read.

    Exit status 1 when a SKILL.md is malformed (the others are still listed).
    """
    from codemode.skills.discovery import discover_skills

    found = discover_skills(cwd)
    if as_json:
        import json

        data = {
            "skills": [
                {
                    "name": s.name,
                    "description": s.description,
                    "scope": s.scope,
                    "path": str(s.skill_file),
                    "helpers": sorted(s.helpers),
                }
                for s in found.skills
            ],
            "problems": [{"path": str(p.path), "message": p.message} for p in found.problems],
            "searched": [{"path": str(d), "scope": scope} for d, scope in found.searched],
        }
        click.echo(json.dumps(data, indent=2))
    else:
        if not found.skills and not found.problems:
            places = ", ".join(str(d) for d, _ in found.searched)
            click.echo(f"no skills found (searched {places})", err=True)
        for s in found.skills:
            helpers = f"  [helpers: {', '.join(sorted(s.helpers))}]" if s.helpers else ""
            click.echo(f"{s.name}  ({s.scope}: {s.directory}){helpers}\n    {s.description}")
        for p in found.problems:
            click.echo(f"error: {p.path}: {p.message}", err=True)
    sys.exit(1 if found.problems else 0)


# --- acp ----------------------------------------------------------------------------


@cli.command()
@click.option("-m", "--model", help="Model name, as the provider spells it.")
@click.option("--provider", help="Provider from the catalog or [model_providers.NAME].")
@click.option("--code-mode/--classic", "code_mode", default=None, help="Dialect of the sessions.")
@config_option()
@sandbox_options
def acp(
    model: str | None,
    provider: str | None,
    code_mode: bool | None,
    overrides: tuple[str, ...],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
) -> None:
    """Run as an Agent Client Protocol agent on stdin/stdout (for editors such as Zed).

    Sessions, streamed messages and tool calls, permission requests, file reads and
    writes through the editor when it offers them, cancellation. Logs go to stderr.
    """
    import asyncio

    from codemode.acp.server import AcpOptions, serve

    # A bad value (-c sandbox_mode=bogus) is a usage error now, not at the first session.
    from codemode.sandbox.cli_options import resolve_modes

    load_config_or_usage(overrides)
    resolve_modes(sandbox_mode, approval_policy, full_auto)
    options = AcpOptions(
        overrides=list(overrides),
        model=model,
        provider=provider,
        code_mode=code_mode,
        sandbox_mode=sandbox_mode,
        approval_policy=approval_policy,
        full_auto=full_auto,
    )
    try:
        asyncio.run(serve(options))
    except KeyboardInterrupt:
        pass


# --- doctor -------------------------------------------------------------------------


@cli.command()
@cwd_option("Repository to look at (default: current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.option("--local", is_flag=True,
              help="Find model servers on this machine (llama.cpp, Ollama, LM Studio, vLLM) "
              "and run one tool-calling round trip through each.")
@click.option("--base-url", "base_urls", multiple=True, metavar="URL",
              help="With --local: check this server (e.g. http://127.0.0.1:8080/v1) "
              "instead of the usual ports.")
@click.option("--model", default=None, help="With --local: the model to ask (default: the "
              "first the server lists).")
def doctor(cwd: Path, as_json: bool, local: bool, base_urls: tuple[str, ...],
           model: str | None) -> None:
    """Show where user data lives and check the environment, with a fix for each problem.

    Exit status 1 when something needs fixing (warn or FAIL lines).
    """
    from codemode.doctor import render, run_checks

    if local or base_urls:
        from codemode.doctor_local import run_local_checks

        report = run_local_checks(list(base_urls), model)
    else:
        report = run_checks(cwd)
    if as_json:
        import dataclasses
        import json

        click.echo(json.dumps([dataclasses.asdict(c) for c in report.checks], indent=2))
    else:
        click.echo(render(report))
    sys.exit(1 if report.problems else 0)


# --- harnesses (issue 5) ------------------------------------------------------------------


@cli.group()
def harness() -> None:
    """List and inspect harnesses (a model family's prompt and tool surface)."""


@harness.command("list")
def harness_list() -> None:
    """Every harness: name, dialects, description."""
    from codemode.harnesses.catalog import harness_infos

    infos = harness_infos()
    width = max(len(i.name) for i in infos)
    for info in infos:
        click.echo(f"{info.name.ljust(width)}  {'+'.join(info.dialects):<13} {info.description}")


@harness.command("show")
@click.argument("name")
@click.option("--code-mode/--classic", "code_mode", default=False, help="Show the code dialect.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def harness_show(name: str, code_mode: bool, as_json: bool) -> None:
    """The rendered prompt of harness NAME and its tools (schemas, or TypeScript in code mode)."""
    import json

    from codemode.harnesses.show import describe_harness

    try:
        shown = describe_harness(name, "code" if code_mode else "classic", Path.cwd())
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(shown, indent=2, ensure_ascii=False))
        return
    click.echo(f"# harness {shown['name']} ({shown['dialect']})\n")
    click.echo(shown["instructions"])
    for tool in shown["tools"]:
        click.echo(f"\n## tool {tool['name']}\n\n{tool['description']}")
        if tool["name"] != "exec":
            click.echo(json.dumps(tool["parameters"], indent=2, ensure_ascii=False))
    if not shown["tools"]:
        click.echo("\n## actions are parsed from the reply text (no function calling)")
        for command in shown.get("commands", []):
            click.echo(f"\n### command {command['name']}\n\n{command['description']}")
            click.echo(json.dumps(command["parameters"], indent=2, ensure_ascii=False))


@cli.group()
def mcp() -> None:
    """MCP servers configured as [mcp_servers.NAME]: their tools join every session."""


@mcp.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@config_option()
def mcp_list(as_json: bool, overrides: tuple[str, ...]) -> None:
    """Start the configured servers and show each one's state and tools (exit 1 if one failed)."""
    from codemode.config import ConfigError, load_config
    from codemode.mcp.commands import list_servers

    try:
        config = load_config(overrides)
        sys.exit(list_servers(config, as_json=as_json))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


@cli.command("mcp-server")
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(min=1, max=65535),
    help="Serve streamable HTTP on 127.0.0.1:PORT instead of stdio.",
)
@cwd_option("Workspace the tools work in (default: current directory).")
@config_option()
@sandbox_options
def mcp_server(
    http_port: int | None,
    cwd: Path,
    overrides: tuple[str, ...],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
) -> None:
    """Serve the tool host over MCP: `execute` runs JavaScript against the tools.

    The configured sandbox and approval policy apply (the options override them); a
    call that would need a human's approval is refused with the reason, since none is
    attached.
    """
    from codemode.agent.build import SessionOptions
    from codemode.config import ConfigError, load_config
    from codemode.mcp.commands import serve

    options = SessionOptions(
        cwd=cwd, sandbox_mode=sandbox_mode, approval_policy=approval_policy, full_auto=full_auto
    )
    try:
        status = serve(load_config(overrides), options, http_port=http_port)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


# --- the interactive session ---------------------------------------------------------


def _interactive_params() -> list[click.Parameter]:
    """exec's options (--sandbox/--approval/--full-auto included), less --json, in order."""

    def holder() -> None: ...

    decorated: Any = session_options(holder)
    return [p for p in reversed(decorated.__click_params__) if p.name != "as_json"]


cli.params.extend(_interactive_params())


def _run_interactive(*, overrides: tuple[str, ...], **kw: Any) -> None:
    from codemode.tui.app import InteractiveOptions, UsageProblem, run_interactive

    try:
        status = run_interactive(InteractiveOptions(overrides=list(overrides), **kw))
    except UsageProblem as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(status)


# An unexpected exception's exit status (sysexits' EX_SOFTWARE): not one a command
# gives for its own failures.
INTERNAL_ERROR_STATUS = 70


def main(argv: list[str] | None = None) -> None:
    from codemode.js_runtime.early import run_and_exit  # a fast exit after `run`

    run_and_exit(_main, argv)


def _main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors are one line on stderr and exit status 2, other click
    errors one line and their own status; an unexpected exception is one line naming
    the log file its traceback went to, never a traceback on the terminal."""
    from codemode.cli_crash import install_thread_hooks

    install_thread_hooks(argv if argv is not None else sys.argv[1:])
    try:
        status = cli.main(args=argv, prog_name="interpreter", standalone_mode=False)
    except click.UsageError as exc:
        if isinstance(exc, click.NoSuchOption):
            from codemode.cli_hints import near_options

            exc.possibilities = near_options(exc.option_name, exc.possibilities or [])
        name = exc.ctx.command_path if exc.ctx else "interpreter"
        click.echo(f"{name}: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        from codemode.cli_crash import one_line

        click.echo(f"interpreter: error: {one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`interpreter tools | head`): nothing left to say to it.
        _quiet_stdout()
        sys.exit(1)
    except Exception as exc:  # the last stop before a traceback
        from codemode.cli_crash import one_line, record_crash

        where = record_crash(exc, argv if argv is not None else sys.argv[1:])
        reason = one_line(f"{type(exc).__name__}: {exc}")
        click.echo(f"interpreter: internal error: {reason} (see {where})", err=True)
        sys.exit(INTERNAL_ERROR_STATUS)
    sys.exit(status if isinstance(status, int) else 0)


def _quiet_stdout() -> None:
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    main()
