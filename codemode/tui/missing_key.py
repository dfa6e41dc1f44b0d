"""A provider whose key is not set, met when the interactive session opens.

One line says which variable is missing; on a terminal the user can then fix it there:
type a key for this session (kept in this process's environment only, never written
anywhere), or pick another provider. Anything else ends the session with status 2.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from codemode.providers.base import MissingKeyError

if TYPE_CHECKING:
    from codemode.tui.protocols import App


async def fix_missing_key(app: App, problem: MissingKeyError) -> bool:
    """Ask how to go on; True when something changed and the session should be opened
    again, False to give up (the caller exits)."""
    say = app.renderer.note
    say(f"! {problem.provider} needs an API key: {problem.env_key} is not set", style="red")
    if not app.reader.interactive:
        return False
    say("  1  enter a key for this session (not saved; export it to keep it)", style="")
    say("  2  use another provider", style="")
    try:
        choice = (await app.reader.ask_text("1, 2, or Enter to quit › ")).strip()
        if choice == "1":
            key = (await app.reader.ask_text(f"{problem.env_key} › ", secret=True)).strip()
            if not key:
                say("no key given", style="yellow")
                return False
            os.environ[problem.env_key] = key  # this process and the commands it starts
            return True
        if choice == "2":
            return await _pick_provider(app)
    except (EOFError, KeyboardInterrupt):
        pass
    return False


async def _pick_provider(app: App) -> bool:
    from codemode.providers.catalog import builtin_providers

    say = app.renderer.note
    # name -> (key variable, default model): the catalog, as config.toml amends it.
    known: dict[str, tuple[str | None, str]] = {
        name: (info.env_key, info.default_model or "")
        for name, info in builtin_providers().items()
    }
    for name, table in app.config.model_providers.items():
        key, model = known.get(name, (None, ""))
        if name in known or "base_url" in table:
            known[name] = (table.get("env_key", key), table.get("default_model", model))
    for name, (key, _) in sorted(known.items()):
        state = f"${key} {'set' if os.environ.get(key) else 'not set'}" if key else "no key"
        say(f"  {name:<18} {state}", style="")
    name = (await app.reader.ask_text("provider › ")).strip()
    if name not in known:
        say(f"! {name!r} is not on the list" if name else "no provider given", style="yellow")
        return False
    default = known[name][1]
    question = f"model [{default}] › " if default else "model › "
    model = (await app.reader.ask_text(question, default)).strip()
    if not model:
        say("no model given", style="yellow")
        return False
    app.options.provider, app.options.model = name, model
    say(f"using {model} via {name} for this session (model_provider in config.toml sets "
        "the default)", style="")
    return True
