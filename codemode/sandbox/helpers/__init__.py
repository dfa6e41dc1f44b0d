"""Small static C programs the sandbox runs, compiled once per machine and user.

- ``compiled``: building them into the helpers cache and verifying them before each use
- ``dropcaps`` (``dropcaps.c``): root's capability drop inside bubblewrap
- ``subreaper.c``: the command server's per-command start
"""
