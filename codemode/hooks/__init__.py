"""Hooks: the user's own commands run at points of a session's life and around every
tool call, in the shape Codex, Open Interpreter and Claude Code share.

- ``definitions``: the file format (``hooks.json``, inline ``[hooks]`` TOML) and one
  hook as found (``HookDef``, with its source and a hash of its exact definition);
- ``discovery``: where hooks are read from, layer by layer;
- ``trust``: which project hooks the person trusted (or disabled), by hash;
- ``process``: running one hook command, contained (timeout, process group, caps);
- ``outcome``: what a hook's exit status and output mean for its event;
- ``engine``: the session's hooks: which match, running them, combining their answers;
- ``tool_calls``: the tool pipeline's ``hooks`` stage (PreToolUse, PostToolUse,
  PermissionRequest through the approver), for every call a program makes too.

Users read ``docs/hooks.md``.
"""
