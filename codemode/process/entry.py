"""The `interpreter` command's own process, and what only it may do.

A library must not change how its host's process imports third-party code: an embedder
that imports ``codemode`` keeps its ``sys.meta_path``, its ``sys.modules`` and the
libraries it loads exactly as they were. The command's ``main`` (``codemode.cli.main``)
calls ``claim()``; from then on the process is codemode's own, and pyseccomp may be
imported without its two ``ldconfig`` runs (``pyseccomp_import``), a module swap that
would be a patch in anyone else's process. The engine worker, a process codemode starts
for itself, claims too.
"""

from __future__ import annotations

_claimed = False


def claim() -> None:
    """Mark this process as the `interpreter` command's own."""
    global _claimed
    _claimed = True


def claimed() -> bool:
    """Whether this process is codemode's own (``claim()`` ran), not an embedder's."""
    return _claimed
