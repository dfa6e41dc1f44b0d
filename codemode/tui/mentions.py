"""``@path`` mentions: a file named in a message is attached to it.

A mention is ``@`` at the start of a word followed by a path relative to the workspace
(``@src/app.py``); an e-mail address is not one. The message keeps its words and gets
each mentioned file's content appended, fenced and labelled with its path. Paths that
are not files, binary files and files over the size limit are reported, not attached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from codemode.tools.fs.text import decode, is_binary

MAX_MENTION_BYTES = 200_000
_MENTION = re.compile(r"(?:(?<=\s)|^)@([^\s@]+)")


@dataclass
class Expanded:
    text: str
    attached: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def expand_mentions(message: str, cwd: Path) -> Expanded:
    """``message`` with the files it mentions appended."""
    result = Expanded(text=message)
    blocks: list[str] = []
    for match in _MENTION.finditer(message):
        rel = match.group(1).rstrip(".,;:!?)'\"")
        path = (cwd / rel).resolve() if not Path(rel).is_absolute() else Path(rel)
        if rel in result.attached:
            continue
        if not path.is_file():
            if path.exists() or "/" in rel or "." in rel:
                result.problems.append(f"@{rel}: not a file")
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            result.problems.append(f"@{rel}: {exc.strerror}")
            continue
        if len(data) > MAX_MENTION_BYTES:
            result.problems.append(f"@{rel}: {len(data)} bytes, over {MAX_MENTION_BYTES}")
            continue
        text, _ = decode(data)  # UTF-8, or UTF-16/32 by its byte order mark
        if is_binary(text):
            result.problems.append(f"@{rel}: binary file, not attached")
            continue
        fence = "````" if "```" in text else "```"
        blocks.append(f"{fence} {rel}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{fence}")
        result.attached.append(rel)
    if blocks:
        result.text = message + "\n\nAttached files:\n\n" + "\n\n".join(blocks)
    return result
