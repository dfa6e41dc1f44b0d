"""The names of the sandbox modes and approval policies (no imports: the CLI reads them)."""

from __future__ import annotations

SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
APPROVAL_POLICIES = ("untrusted", "on-request", "never")
DEFAULT_SANDBOX_MODE = "workspace-write"
DEFAULT_APPROVAL_POLICY = "on-request"
# --full-auto: work without stopping, inside the workspace sandbox.
FULL_AUTO = ("workspace-write", "never")
