"""AGENTS.md discovery: the user's own instructions, then the repository's.

``~/.codemode/AGENTS.md`` applies everywhere. In a repository, every AGENTS.md from
the repository root down to the working directory applies, outermost first, so a
subdirectory's file can refine the root's.
"""

from __future__ import annotations

from pathlib import Path

from codemode.locations import small_files
from codemode.locations.repository import repository_root as repository_root

DOC_NAME = "AGENTS.md"


def project_docs(cwd: Path, home: Path, max_chars: int) -> list[tuple[str, str]]:
    """(label, text) for each AGENTS.md that applies in ``cwd``."""
    cwd = cwd.resolve()
    candidates = [home / DOC_NAME]
    root = repository_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    candidates += [d / DOC_NAME for d in reversed(chain[: chain.index(root) + 1])]
    docs = []
    for path in candidates:
        if max_chars == 0:
            break
        text = _read_doc(path, max_chars)
        if text is None or not text.strip():
            continue
        if len(text) > max_chars:
            text = text[:max_chars] + f"\n[... cut at {max_chars} characters]"
        label = "~/.codemode/AGENTS.md" if path.parent == home else _relative(path, cwd)
        docs.append((label, text))
    return docs


def _relative(path: Path, cwd: Path) -> str:
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return str(path)


def _read_doc(path: Path, max_chars: int) -> str | None:
    """The start of ``path`` (no more than ``max_chars`` characters and one more, so a
    cut shows); None for anything ``small_files`` refuses (a FIFO, ``/dev/zero``, a
    sparse file read to its end, ``/proc/self/environ``)."""
    cap = 4 * (max_chars + 1) if max_chars > 0 else small_files.CAP
    try:
        return small_files.read_bytes(path, cap, truncate=True).decode("utf-8", "replace")
    except OSError:
        return None
