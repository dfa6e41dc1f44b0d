"""What to tell someone whose provider is missing or misspelt: a few lines on how to set
one up (a local server, or a key for a named provider), never the whole catalog.

The text is ``no_provider.txt``; what it names (the local servers and their ports, the
key variables, how many providers there are) is read from the catalog, so it stays true.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from codemode.terminal.hints import near_names

# The two hosted providers the text shows by name (any other is a `--provider` away).
SHOWN_HOSTED = ("openai", "anthropic")
# At most this many close names follow a misspelt provider.
MAX_SUGGESTIONS = 3


def no_provider_message(config_path: Path, environ: Mapping[str, str] | None = None) -> str:
    """How to set a provider up, in about ten lines (``environ``: whose keys are set)."""
    from codemode.providers.catalog import builtin_providers

    catalog = builtin_providers()
    local = [info for info in catalog.values() if not info.needs_key]
    ports = ", ".join(f"{info.name} {_where(info.base_url)}" for info in local)
    template = resources.files("codemode.config").joinpath("no_provider.txt").read_text("utf-8")
    return template.format(
        ports=ports,
        local=local[0].name if local else "NAME",
        openai_key=catalog[SHOWN_HOSTED[0]].key_variable,
        anthropic_key=catalog[SHOWN_HOSTED[1]].key_variable,
        count=len(catalog),
        keys_set=_keys_set(catalog, os.environ if environ is None else environ),
        config=config_path,
    ).rstrip("\n")


def _where(url: str) -> str:
    """``:8080`` for a loopback URL with a port, else the host (and port)."""
    parts = urlsplit(url)
    return f":{parts.port}" if parts.port and parts.hostname in ("127.0.0.1", "localhost") else (
        parts.netloc
    )


def _keys_set(catalog: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """A line naming the provider keys already in the environment (at most three), or
    nothing: such a key is the shortest way to a working session."""
    by_key: dict[str, str] = {}
    for name, info in catalog.items():
        key = info.key_variable
        if key and environ.get(key, "").strip():
            # the first provider with a default model, else the first by name
            if key not in by_key or (info.default_model and not catalog[by_key[key]].default_model):
                by_key[key] = name
    if not by_key:
        return ""
    shown = [f"{key} (--provider {name})" for key, name in sorted(by_key.items())[:3]]
    more = f" and {len(by_key) - 3} more" if len(by_key) > 3 else ""
    return f"  already set here: {', '.join(shown)}{more}\n"


def close_providers(name: str, names: Iterable[str]) -> list[str]:
    """Up to ``MAX_SUGGESTIONS`` provider names close to a misspelt ``name``."""
    known = list(names)
    close = near_names(name, known)
    close += [
        n for n in difflib.get_close_matches(name, known, n=MAX_SUGGESTIONS, cutoff=0.7)
        if n not in close
    ]
    return close[:MAX_SUGGESTIONS]


def unknown_provider_message(name: str, names: Iterable[str]) -> str:
    """One line for a provider neither the catalog nor the config knows."""
    close = close_providers(name, names)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (
        f"unknown provider {name!r}{hint}: define [model_providers.{name}] with base_url "
        "(and wire_api), or use a name `interpreter providers` lists"
    )


def setup_fix(config_path: Path) -> str:
    """``no_provider_message`` in one line (doctor's fix for a missing provider)."""
    from codemode.providers.catalog import builtin_providers

    catalog = builtin_providers()
    local = [info.name for info in catalog.values() if not info.needs_key]
    hosted = catalog[SHOWN_HOSTED[0]]
    return (
        f"a local server: --provider {local[0]} -m MODEL (also {', '.join(local[1:])}); "
        f"a hosted model: export {hosted.key_variable}=... and --provider {hosted.name}; "
        f'to keep it: model_provider = "NAME" and model = "MODEL" in {config_path}'
    )
