"""The command server: one bubblewrap sandbox per session, each command forked inside it.

- ``command_servers``: the host side (start, reuse, tidy, replace a session's server)
- ``command_server``: the program inside the sandbox (standard library only)
- ``process_tree``: a command's whole process tree, ended together
- ``pidfd_process``: ``ChildProcess``, a child waited on through a pidfd
"""
