"""`interpreter warm status|stop`: this user's warm server for this installation."""

from __future__ import annotations

import click

from codemode.cli.root import cli
from codemode.terminal.control_chars import echo


@cli.group("warm")
def warm() -> None:
    """The warm server: commands started from a process with everything imported
    (on by default; CODEMODE_WARM=0 or `warm = false` in config.toml turns them off;
    docs/warm.md)."""


@warm.command("status")
def status() -> None:
    """Say whether warm starts are on and which servers of this user run."""
    from codemode.warm import place, start

    echo(f"warm starts: {'on' if place.enabled() else 'off'}")
    try:
        path = place.socket_path()
        folder = place.runtime_folder()
    except OSError as exc:
        echo(f"no server can run: {exc}")
        return
    pid = place.serving(path)
    running = f"running (pid {pid}, {place.served(path)} commands run)"
    echo(f"this installation's server: {running if pid else 'not running'}")
    echo(f"socket: {path}")
    for other, other_pid in start.servers(folder):
        if other != path:
            echo(f"another server of this user: pid {other_pid} ({other})")


@warm.command("stop")
@click.option("--all", "everyone", is_flag=True, help="Every server of this user.")
def stop(everyone: bool) -> None:
    """Stop this installation's server (commands it runs finish first)."""
    from codemode.warm import place, start

    try:
        paths = [s for s, _ in start.servers(place.runtime_folder())] if everyone else [
            place.socket_path()
        ]
    except OSError as exc:
        raise click.ClickException(f"no server can run: {exc}") from None
    stopped = [pid for path in paths if (pid := start.stop(path))]
    echo(f"stopped {len(stopped)} server(s)" if stopped else "no server was running")
