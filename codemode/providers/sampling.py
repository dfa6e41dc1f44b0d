"""Sampling settings: how long the model may answer and how it picks tokens.

Four keys, each settable at four levels; the most specific level that sets a key wins:

1. the provider's catalog entry (a default, e.g. an output cap for local servers),
2. the top of ``config.toml`` (every provider and model),
3. ``[model_providers.NAME]`` (one provider),
4. ``[model_settings."MODEL"]`` (one model, whichever provider serves it),

and a top-level ``-c key=value`` on the command line beats all of them (to change one
level only, give its full path: ``-c model_settings.smollm2.temperature=0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codemode.locations.config_file import ConfigError, parse_override


class Sampling(BaseModel):
    """Unset (None) means "the service's default"; nothing is sent for it."""

    model_config = ConfigDict(extra="forbid")

    # The longest answer, in tokens; a reply cut off here ends with stop reason "length".
    max_output_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None

    def over(self, base: Sampling) -> Sampling:
        """These settings, with ``base``'s for the keys this one leaves unset."""
        mine = self.model_dump(exclude_none=True)
        return Sampling.model_validate({**base.model_dump(exclude_none=True), **mine})


SAMPLING_KEYS: tuple[str, ...] = tuple(Sampling.model_fields)


def pick(table: Mapping[str, Any] | None) -> Sampling:
    """The sampling keys of a config table (other keys are ignored here)."""
    table = table or {}
    return Sampling.model_validate({k: table[k] for k in SAMPLING_KEYS if k in table})


def command_line_keys(overrides: Iterable[str]) -> Sampling:
    """The sampling keys given at the top level with ``-c``."""
    values: dict[str, Any] = {}
    for text in overrides:
        try:
            path, value = parse_override(text)
        except ConfigError:
            continue  # reported where the config is loaded
        if len(path) == 1 and path[0] in SAMPLING_KEYS:
            values[path[0]] = value
    return Sampling.model_validate(values)


def resolve_sampling(
    *,
    catalog_entry: Mapping[str, Any] | None,
    top_level: Mapping[str, Any],
    provider_table: Mapping[str, Any] | None,
    model_table: Mapping[str, Any] | None,
    overrides: Iterable[str] = (),
) -> Sampling:
    """The settings a session sends, from the levels above (lowest first)."""
    result = Sampling()
    for layer in (catalog_entry, top_level, provider_table, model_table):
        result = pick(layer).over(result)
    return command_line_keys(overrides).over(result)
