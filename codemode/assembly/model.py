"""Which provider and model a session talks to, and how it samples: the configuration
read through the provider catalog (``codemode.providers.catalog.resolve_provider``, the
one place catalog entries and the user's tables are merged)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from codemode.config import Config, ConfigError, codemode_home
from codemode.config.provider_hints import no_provider_message, unknown_provider_message

if TYPE_CHECKING:
    from codemode.providers.base import Provider
    from codemode.providers.catalog import ModelFacts, ResolvedProvider
    from codemode.providers.sampling import Sampling


def provider_named(
    config: Config, name: str | None, notices: list[str] | None = None, *, known: bool = True
) -> ResolvedProvider:
    """The provider ``name`` (else the configured one) as the catalog and the config
    say. With ``known`` a name neither knows is a ConfigError; a bad table always is.
    Keys of its table that have no effect add a line to ``notices``."""
    from codemode.providers.catalog import provider_names, resolve_provider

    name = name or config.model_provider
    if name is None:
        raise ConfigError(no_provider_message(codemode_home() / "config.toml"))
    try:
        resolved = resolve_provider(name, config.model_providers, notices)
    except ValueError as exc:
        raise ConfigError(f"[model_providers.{name}]: {_problems(exc)}") from None
    if known and resolved.info is None:
        raise ConfigError(unknown_provider_message(name, provider_names(config.model_providers)))
    return resolved


def open_named(
    config: Config, name: str | None, notices: list[str] | None = None
) -> tuple[Provider, ResolvedProvider]:
    """Open the provider ``name`` (else the configured one): a client, and what the
    catalog and config say about it."""
    resolved = provider_named(config, name, notices)
    return open_resolved(resolved), resolved


def open_resolved(resolved: ResolvedProvider) -> Provider:
    """A client for a resolved provider (no request is sent yet)."""
    from codemode.providers.catalog import open_provider

    if resolved.info is None:
        raise ConfigError(f"unknown provider {resolved.name!r}")
    return open_provider(resolved.info)


def resolve_provider(
    config: Config, name: str | None, notices: list[str] | None = None
) -> tuple[Provider, str]:
    """Open the configured provider; returns it and its name."""
    provider, resolved = open_named(config, name, notices)
    return provider, resolved.name


def _problems(exc: ValueError) -> str:
    """A validation error as one line: ``key: what is wrong; ...``."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
        for err in exc.errors()
    )


def pick_model(config: Config, provider: ResolvedProvider, model: str | None) -> str:
    """The model: the command line's, the config's, else the provider's default."""
    chosen = model or config.model or provider.default_model
    if not chosen:
        raise ConfigError(f"no model chosen for provider {provider.name!r}: pass --model NAME")
    return chosen


def session_sampling(
    config: Config, provider: ResolvedProvider | str, model: str, overrides: list[str]
) -> Sampling:
    """Max output tokens, temperature, top_p and seed for this provider and model."""
    if isinstance(provider, str):
        provider = provider_named(config, provider, known=False)
    return provider.sampling(
        top_level=config.model_dump(),
        model_table=(
            config.model_settings[model].model_dump() if model in config.model_settings else None
        ),
        overrides=overrides,
    )


@dataclass(frozen=True)
class ModelChoice:
    """Everything the configuration says about the model a session uses."""

    provider: ResolvedProvider
    model: str
    facts: ModelFacts | None  # the catalog's; None when it does not list the model
    sampling: Sampling


def choose_model(
    config: Config, provider: ResolvedProvider, model: str | None, overrides: list[str]
) -> ModelChoice:
    from codemode.providers.catalog import model_facts

    chosen = model or pick_model(config, provider, None)
    facts = model_facts(provider.name, chosen) if chosen else None
    sampling = session_sampling(config, provider, chosen, overrides)
    return ModelChoice(provider, chosen, facts, sampling)
