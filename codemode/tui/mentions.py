"""``@path`` mentions: a file named in a message is attached to it.

A mention is ``@`` at the start of a word followed by a path relative to the workspace
(``@src/app.py``); an e-mail address is not one. The message keeps its words and gets
each mentioned file's content appended, fenced and labelled with its path. Paths that
are not files, binary files and files over the size limit are reported, not attached.

The file is read as ``read_file`` reads one (``codemode.tools.fs.reading``): a command may
have left a FIFO, a link to ``/dev/zero`` or to ``/proc/self/environ``, or a sparse file
of terabytes under the name, and the read is codemode's own, before the message is sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from codemode.tool_terms.errors import ToolError
from codemode.tools.fs.reading import NotRegular, TooBig, read_regular
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
        if rel in result.attached:
            continue
        data = _read(cwd / rel, rel, result.problems)  # (an absolute ``rel`` stays one)
        if data is None:
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


def _read(path: Path, rel: str, problems: list[str]) -> bytes | None:
    """The mentioned file's bytes; None, with the reason added to ``problems`` (for
    what is plainly meant as a path), when it cannot be attached."""
    try:
        return read_regular(path, MAX_MENTION_BYTES, rel)
    except (FileNotFoundError, NotADirectoryError):
        if "/" in rel or "." in rel:  # "@someone" is a name, not a missing file
            problems.append(f"@{rel}: not a file")
    except NotRegular:  # a directory, FIFO, device: never opened for reading
        problems.append(f"@{rel}: not a file")
    except TooBig:
        problems.append(f"@{rel}: over {MAX_MENTION_BYTES} bytes")
    except ToolError as exc:  # refused (this process's /proc entries), or kept changing
        problems.append(f"@{rel}: {exc}")
    except OSError as exc:
        problems.append(f"@{rel}: {exc.strerror or exc}")
    return None
