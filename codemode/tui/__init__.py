"""The interactive session: ``interpreter`` in a terminal.

An inline program (no full-screen mode, so it works over SSH and in tmux): a
prompt-toolkit input line, rich output streamed from the session's events, slash
commands, approvals, and per-turn file snapshots for ``/undo``. Imported only by the
interactive command, so ``interpreter --help`` and ``exec`` never load rich or
prompt-toolkit.
"""
