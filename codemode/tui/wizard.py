"""First run: no provider configured, so ask which one and write it to config.toml.

Offers the local servers of the catalog (Ollama, LM Studio, …), any other
OpenAI-compatible endpoint, and the API-key providers (with the environment variable
to set). For a local server the models it offers are listed, when it answers. The
choice is written into ``$CODEMODE_HOME/config.toml``, keeping what the file holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode.providers.catalog import ProviderInfo
    from codemode.tui.protocols import App

CUSTOM_PROVIDER = "local"


def write_provider_choice(
    path: Path,
    provider: str,
    model: str,
    provider_table: dict[str, Any] | None = None,
    code_mode: bool | None = None,
) -> None:
    """Set ``model_provider`` and ``model`` (and ``[model_providers.PROVIDER]`` and
    ``code_mode`` when given) in the TOML file at ``path``, preserving its other content
    and comments."""
    import tomlkit

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    doc = tomlkit.parse(text)
    doc["model_provider"] = provider
    doc["model"] = model
    if code_mode is not None:
        doc["code_mode"] = code_mode
    if provider_table:
        providers = doc.get("model_providers")
        if providers is None:
            providers = tomlkit.table(is_super_table=True)
            doc["model_providers"] = providers
        table = tomlkit.table()
        for key, value in provider_table.items():
            table[key] = value
        providers[provider] = table
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(tomlkit.dumps(doc), encoding="utf-8")
    tmp.replace(path)


async def list_models(base_url: str, timeout_s: float = 1.5) -> list[str] | None:
    """Model ids a local OpenAI-compatible server offers, or None when it does not answer."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            reply = await client.get(base_url.rstrip("/") + "/models")
            reply.raise_for_status()
            data = reply.json()
    except (httpx.HTTPError, ValueError):
        return None
    rows = data.get("data") if isinstance(data, dict) else None
    return [str(r.get("id")) for r in rows or [] if isinstance(r, dict) and r.get("id")]


async def first_run_setup(app: App) -> bool:
    """Ask, write the config; False when the user gave up (nothing is written then)."""
    import os

    from codemode.config import CONFIG_FILE, codemode_home
    from codemode.providers.catalog import builtin_providers

    say = app.renderer.note
    ask = app.reader.ask_text
    catalog = builtin_providers()
    local = [info for info in catalog.values() if not info.needs_key]
    # The catalog knows over a hundred services; offered here are those ready to use
    # without more choices (a default model), one per key variable (a regional or plan
    # variant sharing its key is a name away, as is any other: type it).
    remote: list[ProviderInfo] = []
    for entry in catalog.values():
        if entry.needs_key and entry.default_model and all(
            entry.key_variable != shown.key_variable for shown in remote
        ):
            remote.append(entry)
    say("No model provider is configured yet. Which one should codemode use?", style="bold")
    options: list[tuple[str, ProviderInfo | None]] = []
    info: ProviderInfo | None  # a choice on the list; None: another endpoint
    for info in local:
        options.append((f"{info.name:<16} {info.description} ({info.base_url})", info))
    options.append(("other            another OpenAI-compatible endpoint (you give the URL)", None))
    for info in remote:
        state = "set" if os.environ.get(info.env_key or "") else "not set"
        options.append((f"{info.name:<16} {info.description} (${info.env_key}, {state})", info))
    for n, (label, _) in enumerate(options, 1):
        say(f"  {n:>2}  {label}", style="")
    say(f"  or the name of any of the {len(catalog)} providers `interpreter providers` lists",
        style="dim")
    try:
        while True:
            answer = await ask("provider (number or name) › ", "1")
            info, ok = _pick(options, answer)
            if not ok and answer.strip() in catalog:  # one not on the short list
                info, ok = catalog[answer.strip()], True
            if ok:
                break
            say(f"! {answer!r} is not on the list", style="yellow")
        table: dict[str, Any] | None = None
        if info is None:
            name = CUSTOM_PROVIDER
            base_url = await ask("base URL (for example http://127.0.0.1:8000/v1) › ")
            if not base_url.startswith(("http://", "https://")):
                say("! the URL must start with http:// or https://; nothing written", "red")
                return False
            wire = await ask("wire (chat, responses or messages) [chat] › ", "chat")
            if wire not in ("chat", "responses", "messages", "anthropic"):
                say(f"! unknown wire {wire!r}; nothing written", "red")
                return False
            table = {"base_url": base_url, "wire_api": wire}
            default = ""
        else:
            name, base_url, default = info.name, info.base_url, info.default_model or ""
            if info.needs_key and not os.environ.get(info.env_key or ""):
                say(f"set {info.env_key} in your environment before the first message", "yellow")
        if info is None or not info.needs_key:
            models = await list_models(base_url)
            if models is None:
                say(f"no model list from {base_url} (not running, or no /models)", "yellow")
            elif models:
                say(f"models there: {', '.join(models[:12])}")
                default = default or models[0]
        prompt = f"model [{default}] › " if default else "model › "
        model = await ask(prompt, default)
        if not model:
            say("! no model given; nothing written", "red")
            return False
        say("Code mode: the model writes short JavaScript programs that call the tools, so "
            "one step can read files, search and run the tests together; classic: one tool "
            "call per step. /code-mode switches any time.", style="")
        code_mode = _yes(await ask("use code mode? [Y/n] › ", "y"))
    except (EOFError, KeyboardInterrupt):
        say("setup cancelled; nothing written (--provider NAME -m MODEL picks one for a "
            "session; `interpreter doctor` says how to set one up)", "yellow")
        return False
    path = codemode_home() / CONFIG_FILE
    write_provider_choice(path, name, model, table, code_mode=code_mode)
    say(
        f"wrote {path}: model_provider = {name!r}, model = {model!r}, "
        f"code_mode = {'true' if code_mode else 'false'}",
        "green",
    )
    return True


def _yes(answer: str) -> bool:
    return answer.strip().lower() in ("", "y", "yes")


def _pick(
    options: list[tuple[str, ProviderInfo | None]], answer: str
) -> tuple[ProviderInfo | None, bool]:
    answer = answer.strip()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1][1], True
    for _, info in options:
        if info is not None and info.name == answer:
            return info, True
    if answer == "other":
        return None, True
    return None, False
