"""The ``--sandbox`` / ``--approval`` / ``--full-auto`` options, shared by every command
that runs tools (``interpreter run``, ``interpreter exec``, the interactive session)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import click

from codemode.sandbox.modes import (
    APPROVAL_POLICIES,
    DEFAULT_APPROVAL_POLICY,
    DEFAULT_SANDBOX_MODE,
    SANDBOX_MODES,
    ModeConflict,
    resolve_modes,
)


def sandbox_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--sandbox MODE``, ``--approval POLICY`` and ``--full-auto`` to a command; it
    receives ``sandbox_mode``, ``approval_policy`` (None when not given) and ``full_auto``,
    and never a contradictory combination (a usage error, before the command starts)."""
    given = f

    @functools.wraps(given)
    def checked(*args: Any, **kwargs: Any) -> Any:
        usage_checked_modes(
            kwargs.get("sandbox_mode"), kwargs.get("approval_policy"), bool(kwargs.get("full_auto"))
        )
        return given(*args, **kwargs)

    f = click.option(
        "--full-auto",
        is_flag=True,
        help="Work without asking, confined: same as --sandbox workspace-write --approval never.",
    )(checked)
    f = click.option(
        "--approval",
        "approval_policy",
        type=click.Choice(APPROVAL_POLICIES),
        default=None,
        help="When to ask before running a command: untrusted (anything the rules do not "
        "allow), on-request (what the rules mark prompt), never (run it, confined). "
        f"Without a person to ask, a command needing approval is refused. [default: "
        f"{DEFAULT_APPROVAL_POLICY}]",
    )(f)
    f = click.option(
        "-s",
        "--sandbox",
        "sandbox_mode",
        type=click.Choice(SANDBOX_MODES),
        default=None,
        help="How commands are confined: read-only, workspace-write (writes only in the "
        "workspace, no network) or danger-full-access (no confinement). "
        f"[default: {DEFAULT_SANDBOX_MODE}]",
    )(f)
    return f


def usage_checked_modes(
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
    *,
    default_mode: str = DEFAULT_SANDBOX_MODE,
    default_policy: str = DEFAULT_APPROVAL_POLICY,
) -> tuple[str, str]:
    """``codemode.sandbox.modes.resolve_modes``, a conflict as click.UsageError (exit 2)."""
    try:
        return resolve_modes(
            sandbox_mode,
            approval_policy,
            full_auto,
            default_mode=default_mode,
            default_policy=default_policy,
        )
    except ModeConflict as exc:
        raise click.UsageError(str(exc)) from None


def configured_sandbox(
    config: Mapping[str, Any],
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
) -> dict[str, Any]:
    """The sandbox settings of a command that reads the raw config (``interpreter run``):
    its ``sandbox_mode``, ``approval_policy`` and ``[sandbox]`` table, the flags
    overriding them, as SandboxSettings fields. Commands that load the whole ``Config``
    get the same from ``codemode.assembly.parts.sandbox_for`` (after ``sandbox_options``
    has refused contradictory flags).

    Raises click.UsageError (exit 2) for a value that is not valid. The two modes are
    checked without pydantic; a ``[sandbox]`` table, when there is one, is validated
    with it (a script run that sets none does not pay for the import).
    """
    configured = {}
    for key, allowed, default in (
        ("sandbox_mode", SANDBOX_MODES, DEFAULT_SANDBOX_MODE),
        ("approval_policy", APPROVAL_POLICIES, DEFAULT_APPROVAL_POLICY),
    ):
        value = config.get(key, default)
        if value not in allowed:
            raise click.UsageError(
                f"invalid {key} {value!r} (config file or -c): expected one of "
                f"{', '.join(allowed)}"
            )
        configured[key] = value
    mode, policy = usage_checked_modes(
        sandbox_mode,
        approval_policy,
        full_auto,
        default_mode=configured["sandbox_mode"],
        default_policy=configured["approval_policy"],
    )
    settings: dict[str, Any] = {"sandbox_mode": mode, "approval_policy": policy}
    table = config.get("sandbox")
    if table is None:
        return settings
    if not isinstance(table, Mapping):
        raise click.UsageError(f"[sandbox] must be a table, got {type(table).__name__}")
    from pydantic import ValidationError  # lazy: pydantic, only for a [sandbox] table

    # lazy: pydantic, only for a [sandbox] table
    from codemode.sandbox.settings import SandboxOptions

    try:
        options = SandboxOptions.model_validate(dict(table))
    except ValidationError as exc:
        problems = "; ".join(
            f"sandbox.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            for err in exc.errors()
        )
        raise click.UsageError(f"invalid configuration: {problems}") from None
    settings.update(options.model_dump())
    return settings
