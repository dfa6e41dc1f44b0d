"""Warm starts: every `interpreter` command served by a process forked from a server
that has imported everything, as Mercurial's ``chg`` serves ``hg``.

- ``place``: whether warm starts are wanted, and where this user's server for this
  installation listens (a private folder; the socket's name is the installation's key);
- ``protocol``: what a caller sends (argv, environment, folder, umask, limits,
  signal dispositions, descriptors) and what comes back;
- ``client``: the launcher's side (standard library only: it runs before anything
  else is imported), signals forwarded, the exit status returned;
- ``peer``: who may be served (this user, not confined further than the server);
- ``server``: the server's loop; ``worker``: a forked process made into the caller's;
  ``spare``: what a process forked ahead makes ready, by the kind of command last run
  (a code-mode host: its engine worker booted);
- ``warm_client.c``: the compiled client (the shim beside Codex runs it), the same
  protocol without Python's start.

docs/warm.md is the user's page. Nothing here imports the rest of codemode: the server
is given the command to run (``codemode.cli``'s) and what its spares make ready by
whoever starts it (``codemode.launch.serve``).
"""
