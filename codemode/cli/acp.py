"""``interpreter acp``: codemode as an Agent Client Protocol agent (for editors)."""

from __future__ import annotations

import click

from codemode.cli.options import config_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.cli.sandbox_options import sandbox_options


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
    from codemode.acp.server import AcpOptions, serve
    from codemode.process import interruptible

    # A bad value (-c sandbox_mode=bogus) is a usage error now, not at the first session
    # (sandbox_options has refused contradictory flags already).
    load_config_or_usage(overrides)
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
        interruptible.run(serve(options))
    except KeyboardInterrupt:
        pass
