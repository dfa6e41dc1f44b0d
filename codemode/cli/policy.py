"""``interpreter policy``: how a command would be judged (``check``) and which
confinement this machine offers (``confinement``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.cli.options import cwd_option
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo, json_text

if TYPE_CHECKING:
    from codemode.sandbox.confinement.promises import Promise


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
    from codemode.sandbox.execpolicy.check_cli import EXIT_STATUS, evaluate, render
    from codemode.sandbox.execpolicy.rules_file import RulesError

    try:
        ev, notices = evaluate(command, cwd=cwd, rules_files=rules_files)
    except RulesError as exc:
        echo(f"interpreter policy check: error: {exc}", err=True)
        sys.exit(2)
    for notice in notices:
        echo(f"interpreter policy check: notice: {notice}", err=True)
    echo(render(ev, as_json=as_json))
    sys.exit(EXIT_STATUS[ev.decision])


@policy.command("confinement")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def policy_confinement(as_json: bool) -> None:
    """Which confinement backends work on this machine, and which promises each keeps."""
    from codemode.sandbox.confinement.confine import (
        ConfinementUnavailable,
        command_server_check,
        decide_backend,
        probe,
    )
    from codemode.sandbox.confinement.promises import promises
    from codemode.sandbox.settings import SandboxSettings

    table = promises()
    server = command_server_check()
    if as_json:
        try:  # what the default settings get here, and why not the ones before it
            chosen: dict[str, object] = decide_backend(SandboxSettings()).to_json()
        except ConfinementUnavailable as exc:
            chosen = {"backend": None, "error": str(exc)}
        echo(json_text({"backends": probe().to_json(), "default_backend": chosen,
                        "command_server": server,
                        "promises": {p.key: p.to_json() for p in table}}, indent=2))
        return
    _print_confinement(probe().to_json(), server, table)


def _print_confinement(
    backends: dict[str, str | None], server: str | None, table: list[Promise]
) -> None:
    """Each backend's state and the command server's, then per backend the promises it
    keeps and why not."""
    for name, why in backends.items():
        echo(f"{name:<10}  {'works' if why is None else 'unavailable: ' + why}")
    echo("command server  " + ("works: one bubblewrap per session" if server is None
               else f"unavailable ({server}): one bubblewrap per command"))
    for backend in ("bubblewrap", "landlock"):
        echo(f"\n{backend}:")
        for p in table:
            why = getattr(p, backend)
            echo(f"  {'kept' if why is None else 'NOT KEPT'}  {p.text}")
            if why is not None:
                echo(f"            {why}")
