"""Filesystem access for the file tools, safe against a program racing them.

The file tools run in the agent's own (unconfined) process, while a confined shell
may be changing the workspace at the same moment. Every path is therefore walked one
component at a time from a directory file descriptor, each step opened with
``O_NOFOLLOW``; a symlink met on the way is read and followed by hand, and only while
its target stays inside a writable root (``codemode.hostfs.beneath``, below the
sandbox, which uses it too). Writes are a temporary file
plus a rename inside the held parent directory, so no swap of a path component after
the check can send a write elsewhere. Reads open with ``O_NONBLOCK``, refuse anything
but a regular file and stop at a byte cap (``reading``). ``guard`` is the one place
that says which paths are protected; ``text`` decodes and re-encodes file contents
without losing a byte.
"""
