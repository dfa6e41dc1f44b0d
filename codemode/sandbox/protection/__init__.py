"""Paths no command or file tool may write: codemode's own state, ``.codemode/``, ``.git``.

- ``protected``: the one predicate for ``.codemode/`` and ``.git`` inside a writable root
- ``own_paths``: codemode's state and installation, kept off every writable root
- ``paths``: ``write_refusal``, which paths the file tools may write
- ``codemode_watch``: ``.codemode/`` folders and ``.git`` entries a command creates deeper
"""
