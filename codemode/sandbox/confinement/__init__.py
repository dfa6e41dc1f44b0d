"""Confinement backends: how a command is kept to its writable roots, failing closed.

- ``confine``: the backend chosen for a session and ``spawn_confined``
- ``bwrap``: bubblewrap (namespaces, read-only root, protected paths bound read-only)
- ``landlock``: Landlock where bubblewrap is missing
- ``seccomp``: the syscall filter both use; ``unix_sockets``: the sockets a command reaches
- ``promises``: what each backend promises on this machine (``policy confinement``, doctor)
- ``grpc_fork``: gRPC's fork handlers, off in codemode's processes (Landlock forks)
"""
