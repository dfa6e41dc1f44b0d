"""The `interpreter` command's own process, and what only it may do at start.

A library must not change how its host's process imports third-party code: an embedder
that imports ``codemode`` keeps its ``sys.meta_path``, its ``sys.modules`` and the
libraries it loads exactly as they were. The console script's entry (``codemode.cli``)
calls ``claim()`` before anything else; from then on the process is codemode's own, and
two start-up savings that would be patches in anyone else's process are allowed:

- httpx's command line (rich, pygments) is put off until something runs it
  (``httpx_cli``);
- pyseccomp is imported without its two ``ldconfig`` runs (``pyseccomp_import``).

The engine worker, a process codemode starts for itself, claims too.
"""

from __future__ import annotations

_claimed = False


def claim() -> None:
    """Mark this process as the `interpreter` command's own and do its start-up work."""
    global _claimed
    _claimed = True
    from codemode.process import httpx_cli

    httpx_cli.defer()


def claimed() -> bool:
    """Whether this process is codemode's own (``claim()`` ran), not an embedder's."""
    return _claimed
