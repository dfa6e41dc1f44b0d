"""The execpolicy: what a shell command runs, and whether it may run without asking.

- ``shell_parse`` (``shell_walk``, ``shell_nodes``) / ``script_types`` / ``words`` /
  ``continuations`` / ``heredocs`` / ``line_checks`` / ``nested_scripts``: every simple
  command of a script (tree-sitter-bash)
- ``unwrap`` / ``unwrap_shells`` / ``unwrap_builtins`` / ``env_split`` / ``wrapper_table``
  (``wrappers.toml``): what a wrapper (``env``, ``sudo``, ``bash -c``, ``xargs``...) runs
- ``code_checks``, ``variables`` (``variables.toml``): places bash evaluates data as code,
  variables that change what runs
- ``rules`` / ``rules_file`` / ``default.rules``: Codex ``.rules`` files; ``verdicts``: the
  decisions
- ``safe_args`` (``safe_commands.toml``) / ``program_checks`` / ``sed_script`` /
  ``findings`` / ``command_checks``: which commands are known read-only, option by option
- ``devices`` (``devices.toml``), ``rm_checks``, ``secret_reads`` (``secret_paths``,
  ``secret_paths.toml``, ``word_patterns``): device writes, deletes outside the
  workspace, reads of secrets
- ``program_source`` (``toolchain_proxies.toml``): whether a name is the program an
  ``allow`` means
- ``policy``: ``Policy.evaluate``, the decision; ``check_cli``: ``interpreter policy check``
"""
