"""Paths no command or file tool may write: codemode's own state, ``.codemode/``, ``.git``.

- ``protected``: the one predicate for ``.codemode/`` and ``.git`` inside a writable root
- ``own_paths``: codemode's state and installation, kept off every writable root
- ``user_trust``: what the user's other programs run or trust (a home workspace's
  dot-entries, PATH folders, folders the environment names), kept the same way
- ``hook_files``: the workspace files trusted hooks run, kept the same way
- ``paths``: ``write_refusal``, which paths the file tools may write
- ``codemode_watch``: ``.codemode/`` folders and ``.git`` entries a command creates deeper
"""
