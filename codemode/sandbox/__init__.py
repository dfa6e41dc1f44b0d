"""Sandbox: execpolicy on parsed shell commands, process confinement and approvals.

Every subprocess a tool starts goes through ``SandboxSession.spawn`` (policy check →
approval → confined execution), including those started by calls from code mode.

- ``shell_parse`` / ``unwrap`` / ``unwrap_builtins`` / ``words`` / ``continuations`` /
  ``line_checks``: every simple command of a script (tree-sitter-bash), and what it runs
- ``code_checks``: assignments, arithmetic and other places bash evaluates data as code
- ``rules`` / ``default.rules`` / ``policy``: Codex ``.rules`` files and the decision
- ``safe_args`` / ``safe_commands.toml`` / ``program_checks`` / ``sed_script`` /
  ``command_checks``: which commands are known read-only, option by option
- ``devices`` / ``devices.toml``, ``variables`` / ``variables.toml``, ``rm_checks``: device
  writes, variables that change what runs, deletes outside the workspace
- ``settings``: ``SandboxSettings`` (config ``sandbox_mode``, ``approval_policy``, ``[sandbox]``)
- ``confine`` / ``bwrap`` / ``landlock`` / ``seccomp``: confinement backends, fail closed
- ``command_servers`` / ``command_server``: one bubblewrap sandbox per session, each
  command forked inside it; ``helpers`` (``dropcaps.c``, ``subreaper.c``): compiled once
- ``approval``: the ``Approver`` protocol and ``ApprovalRequest``
- ``session``: ``SandboxSession``, the per-session state ``ToolContext.sandbox`` holds
- ``env``: credentials withheld from subprocesses

Nothing is imported here, so importing the package costs nothing.
"""
