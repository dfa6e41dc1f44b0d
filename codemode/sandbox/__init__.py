"""Sandbox: execpolicy on parsed shell commands, process confinement and approvals.

Every subprocess a tool starts goes through ``ToolContext.sandbox.spawn``: a
``SandboxSession`` (policy check → approval → confined execution), or an ``Unconfined``
sandbox where an embedder gave none, including those started by calls from code mode.

Start with ``protocols``: the seams. ``Sandbox`` is what tools call (run a command, may
this path be written, may this outside tool run, ask about a write); ``Check`` is one
per-command check of the execpolicy (``execpolicy.command_checks.HARD_CHECKS`` lists them).

What other packages use (nothing else of it; the rest is the sandbox's own):

- ``protocols``: ``Sandbox`` and ``Check``
- ``session``: ``SandboxSession``, the confined ``Sandbox``, composed of its settings, an
  ``approvals.gate.CommandGate`` (rules, approver) and a ``confined_runner.ConfinedRunner``
  (the backend ``confinement.confine.decide_backend`` picks, the scratch folder, the
  ``git.keeper``, the command servers)
- ``unconfined``: ``Unconfined``, the ``Sandbox`` of a context made without one
- ``shell_command``: the one place a command line becomes an argv
- ``settings``: ``SandboxSettings`` (config ``sandbox_mode``, ``approval_policy``,
  ``[sandbox]``); ``modes``: their names and ``resolve_modes`` (the command-line flags
  themselves are ``codemode.cli.sandbox_options``)
- ``env``: credentials withheld from subprocesses
- ``approvals.approval``: ``Approver`` and ``ApprovalRequest``, which the terminal, ACP
  and MCP answer; ``approvals.tool_trust``: ``authorize_tool``
- ``protection.paths`` / ``protection.protected`` / ``protection.own_paths``: why the
  file tools may not write a path
- ``server.pidfd_process``: ``ChildProcess``, what the shell tool waits on
- ``confinement.confine`` (``probe``), ``confinement.promises``: the backends available
  here, for ``doctor`` and ``policy confinement``; ``confinement.grpc_fork``: run first
- ``execpolicy.check_cli`` / ``execpolicy.policy``: ``interpreter policy check``
- ``git.host_git``: how git is run on the host

The subpackages, one concept each (each ``__init__`` lists its modules):

- ``execpolicy``: what a shell command runs and whether it may run without asking
- ``approvals``: the ``Approver`` protocol, and trust in tools outside this process
- ``confinement``: the backends (bubblewrap, Landlock, seccomp), failing closed
- ``server``: the command server, one sandbox per session, each command forked inside
- ``helpers``: the small C programs commands start through, compiled once and verified
- ``protection``: codemode's own state, ``.codemode/`` and ``.git``, kept from commands
- ``git``: git's configuration and hooks kept as they were around each command

Nothing is imported here, so importing the package costs nothing.
"""
