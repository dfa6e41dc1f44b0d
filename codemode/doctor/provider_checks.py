"""``interpreter doctor``'s provider checks: the configured provider (a todo when there
is none), the model it will use, and which key variables are set."""

from __future__ import annotations

import os
from typing import Any

from codemode.doctor.report import Report


def provider_keys(report: Report) -> None:
    from codemode.config import CONFIG_FILE, ConfigError, codemode_home, load_config
    from codemode.config.provider_hints import close_providers, setup_fix
    from codemode.providers.catalog import provider_names, resolve_provider

    try:
        config = load_config()
    except ConfigError:
        config = None
    chosen = config.model_provider if config else None
    tables = config.model_providers if config else {}
    catalog: dict[str, str | None] = {}
    for name in provider_names(tables):
        try:
            info = resolve_provider(name, tables).info
        except ValueError:  # a bad table: the config check reports it
            info = None
        catalog[name] = info.env_key if info is not None else None
    if chosen is None:
        report.add("providers", "model_provider", "todo", "none configured yet",
                   setup_fix(codemode_home() / CONFIG_FILE))
    elif chosen not in catalog and not (config and chosen in config.model_providers):
        close = close_providers(chosen, catalog)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        report.add("providers", "model_provider", "error",
                   f"{chosen!r} is not a known provider{hint}",
                   f"define [model_providers.{chosen}] with base_url and wire_api")
    else:
        _chosen_model(report, chosen, tables, config.model if config else None)
    by_key: dict[str, list[str]] = {}
    for name, env_key in catalog.items():
        if env_key:
            by_key.setdefault(env_key, []).append(name)
    unset = 0
    for env_key, names in sorted(by_key.items()):
        present = bool(os.environ.get(env_key, "").strip())
        used = chosen in names
        label = env_key
        who = ", ".join(sorted(names))
        if present:
            report.add("providers", label, "ok", f"set (for {who})")
        elif used:
            report.add("providers", label, "error", f"not set, and {chosen} needs it",
                       f"export {env_key}=... (the key for {chosen})")
        else:
            unset += 1  # one line for all of these: the catalog knows over a hundred
    if unset:
        report.add("providers", "other keys", "info",
                   f"{unset} key variables not set (`interpreter providers` lists them)")
    keyless = sorted(name for name, env_key in catalog.items() if not env_key)
    report.add("providers", "no key needed", "info", ", ".join(keyless))


def _chosen_model(report: Report, provider: str, tables: dict[str, Any], model: str | None) -> None:
    from codemode.providers.catalog import resolve_provider

    try:
        info = resolve_provider(provider, tables).info
    except ValueError:  # a bad table: the config check reports it
        return
    chosen = model or (info.default_model if info else None)
    if chosen:
        report.add("providers", "model", "ok", f"{chosen} via {provider}"
                   + ("" if model else " (the provider's default)"))
    else:
        report.add("providers", "model", "todo", f"none chosen for {provider}",
                   'set model = "NAME" in config.toml, or pass -m NAME '
                   f"(`interpreter models {provider}` lists the catalog's, if any)")
