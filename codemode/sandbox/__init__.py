"""Sandbox: execpolicy on parsed shell commands, process confinement and approvals.

Every subprocess a tool starts goes through ``SandboxSession.spawn`` (policy check →
approval → confined execution), including those started by calls from code mode.

- ``shell_parse`` / ``unwrap`` / ``words``: every simple command of a script (tree-sitter-bash)
- ``rules`` / ``default.rules`` / ``policy``: Codex ``.rules`` files and the decision
- ``settings``: ``SandboxSettings`` (config ``sandbox_mode``, ``approval_policy``, ``[sandbox]``)
- ``confine`` / ``bwrap`` / ``landlock`` / ``seccomp``: confinement backends, fail closed
- ``approval``: the ``Approver`` protocol and ``ApprovalRequest``
- ``session``: ``SandboxSession``, the per-session state ``ToolContext.sandbox`` holds
- ``env``: credentials withheld from subprocesses

Nothing is imported here, so importing the package costs nothing.
"""
