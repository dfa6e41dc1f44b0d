"""What ``interpreter exec`` accepts so the Codex SDK can drive it unchanged.

The SDK (npm ``@openai/codex-sdk``, pointed at us with ``codexPathOverride``) passes a
few Codex config keys and environment variables we spell differently. They are
translated here, before the config is validated, so our own keys stay strict:

- ``openai_base_url=URL`` (the SDK's ``baseUrl``) sets the ``openai`` provider's base
  URL, and makes ``openai`` the provider when none is configured (Codex's default).
- ``CODEX_API_KEY`` (the SDK's ``apiKey``) is the ``openai`` provider's key when
  ``OPENAI_API_KEY`` is not set.
- ``sandbox_workspace_write.network_access`` becomes ``sandbox.network_access``.
- Keys for features we do not have (``web_search``...) are accepted and ignored, with a
  notice on stderr, rather than failing a run the SDK started.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from codemode.config import parse_override

# Codex keys with no counterpart here: accepted, reported, dropped.
IGNORED_KEYS = frozenset(
    {
        "web_search",
        "tools.web_search",
        "model_reasoning_summary",
        "model_verbosity",
        "show_raw_agent_reasoning",
        "hide_agent_reasoning",
    }
)
RENAMED_KEYS = {
    "openai_base_url": "model_providers.openai.base_url",
    "sandbox_workspace_write.network_access": "sandbox.network_access",
}


@dataclass
class Translated:
    overrides: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    # The SDK's baseUrl was given: the openai provider is meant.
    openai_base_url: bool = False


def translate_overrides(overrides: list[str]) -> Translated:
    """Our overrides for ``-c`` values that may use Codex's key names."""
    out = Translated()
    for text in overrides:
        key, sep, value = text.partition("=")
        name = key.strip()
        if not sep:
            out.overrides.append(text)  # load_config reports the malformed override
            continue
        if name in IGNORED_KEYS:
            out.notices.append(f"-c {name}: not supported by codemode; ignored")
            continue
        if name in RENAMED_KEYS:
            parse_override(text)  # fail on a bad value with the user's own spelling
            out.openai_base_url |= name == "openai_base_url"
            out.overrides.append(f"{RENAMED_KEYS[name]}={value}")
            continue
        out.overrides.append(text)
    if os.environ.get("CODEX_API_KEY") and not os.environ.get("OPENAI_API_KEY"):
        out.overrides.insert(0, 'model_providers.openai.env_key="CODEX_API_KEY"')
    return out
