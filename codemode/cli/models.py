"""``interpreter providers`` and ``interpreter models PROVIDER``: the catalog's tables."""

from __future__ import annotations

import click

from codemode.cli.options import config_option, load_config_or_usage
from codemode.cli.root import cli
from codemode.terminal.control_chars import echo


@cli.command()
@config_option()
def providers(overrides: tuple[str, ...]) -> None:
    """List the model providers: the built-in catalog plus your [model_providers].

    KEY says whether the key variable is set in this environment; * marks the
    configured model_provider.
    """
    from codemode.providers.listing import providers_table

    config = load_config_or_usage(overrides)
    echo(providers_table(config.model_providers, config.model_provider))


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
            echo(f"the catalog lists no models for {provider!r} (a local server: ask "
                       "it, e.g. GET /v1/models)", err=True)
            raise click.exceptions.Exit(1)
        hint = closest_name(provider, list(_catalog()))
        raise click.UsageError(
            f"unknown provider {provider!r}{f' (did you mean {hint}?)' if hint else ''}; "
            "`interpreter providers` lists them"
        )
    echo(models_table(provider))
