"""The command server: one bubblewrap sandbox per session, each command forked inside it.

- ``command_servers``: a session's servers (reuse, replace, retire)
- ``server_handle``: ``CommandServer``, the host's handle on one server, and
  ``ServerProcess``, a command running in it; ``server_key``: when a server is reused
- ``command_server``: the program inside the sandbox (standard library only), with
  ``proc_files``, ``baseline`` and ``tidy``; ``server_program``: how the host passes
  those modules' texts into the sandbox
- ``process_tree``: a command's whole process tree, ended together
- ``pidfd_process``: ``ChildProcess``, a child waited on through a pidfd
"""
