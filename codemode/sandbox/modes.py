"""The names of the sandbox modes and approval policies, and the pair a command's
options ask for (no imports: the CLI reads them)."""

from __future__ import annotations

SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
APPROVAL_POLICIES = ("untrusted", "on-request", "never")
DEFAULT_SANDBOX_MODE = "workspace-write"
DEFAULT_APPROVAL_POLICY = "on-request"
# --full-auto: work without stopping, inside the workspace sandbox.
FULL_AUTO = ("workspace-write", "never")


class ModeConflict(ValueError):
    """Options that contradict each other (``--full-auto`` with ``--sandbox``); the CLI
    reports it as a usage error."""


def resolve_modes(
    sandbox_mode: str | None,
    approval_policy: str | None,
    full_auto: bool,
    *,
    default_mode: str = DEFAULT_SANDBOX_MODE,
    default_policy: str = DEFAULT_APPROVAL_POLICY,
) -> tuple[str, str]:
    """The (sandbox_mode, approval_policy) the options ask for; the defaults normally
    come from the config file. Raises ModeConflict for contradictory options."""
    if full_auto:
        if sandbox_mode is not None or approval_policy is not None:
            raise ModeConflict("--full-auto cannot be combined with --sandbox or --approval")
        return FULL_AUTO
    return sandbox_mode or default_mode, approval_policy or default_policy
