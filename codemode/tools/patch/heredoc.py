"""The first line of ``apply_patch <<'EOF'`` sent as a shell command.

Read by the shell route (``intercept``: the command is a patch) and by the lenient
parser (``lenient``: a patch wrapped in the heredoc), so it lives apart from both and
neither imports the other.
"""

from __future__ import annotations

import re

_OPENER = re.compile(
    r"""\s*
    (?:cd\s+(?P<dir>'[^']*'|"[^"]*"|[^\s;&|'"]+)\s*&&\s*)?
    (?:apply_patch|applypatch)\s*
    <<-?\s*(?P<quote>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)(?P=quote)\s*""",
    re.VERBOSE,
)


def parse_heredoc_opener(line: str) -> tuple[str | None, str] | None:
    """For a first line like ``cd src && apply_patch <<'EOF'``: the directory (or None)
    and the heredoc's end tag. None when the line is something else."""
    m = _OPENER.fullmatch(line)
    if m is None:
        return None
    directory = m.group("dir")
    if directory is not None and directory[:1] in "'\"":
        directory = directory[1:-1]
    return directory, m.group("tag")
