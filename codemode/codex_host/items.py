"""Content items and error text, as Codex's client expects them from a host."""

from __future__ import annotations

import json
import re

from codemode.codex_host.model import ContentItem, ImageItem, TextItem
from codemode.js_runtime.models import ExecError

# Codex's host names the program's module exec_main.mjs in stack frames.
_PROGRAM_FILE = re.compile(r"\bprogram\.js:")
_UNCAUGHT = "Uncaught "
_DETAILS = ("auto", "low", "high", "original")
# A token is about four characters of English text or code (what the budget counts).
_CHARS_PER_TOKEN = 4


def error_text(error: ExecError) -> str:
    """The text after "Script error:": the error and where it happened in the program.

    A thrown value that is not an Error (a failed tool call's message is a string) is
    shown as its text, as Codex's host shows it."""
    if error.name == "Error" and error.line is None and error.message.startswith(_UNCAUGHT):
        return error.message[len(_UNCAUGHT) :]
    if error.stack:
        return _PROGRAM_FILE.sub("exec_main.mjs:", error.stack)
    if error.line is not None:
        return f"{error.name}: {error.message}\n    at exec_main.mjs:{error.line}:{error.column}"
    return f"{error.name}: {error.message}"


def parse_image(text: str) -> ImageItem | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("image_url"), str):
        return None
    detail = data.get("detail")
    return ImageItem(data["image_url"], detail if detail in _DETAILS else None)


def budget(items: list[ContentItem], max_tokens: int) -> list[ContentItem]:
    """Text items within ``max_tokens`` (about four characters each): the text over the
    budget is cut from the middle of the item that crosses it, and later text items are
    dropped, with a marker saying how much went."""
    limit = max(0, max_tokens) * _CHARS_PER_TOKEN
    used = 0
    out: list[ContentItem] = []
    dropped = 0
    for item in items:
        if not isinstance(item, TextItem):
            out.append(item)
            continue
        room = limit - used
        if dropped or len(item.text) > room:
            if room > 0 and not dropped:
                head = item.text[: room // 2]
                tail = item.text[len(item.text) - (room - room // 2) :] if room > 1 else ""
                gone = len(item.text) - len(head) - len(tail)
                out.append(TextItem(f"{head}…{_tokens(gone)} tokens truncated…{tail}"))
                used = limit
            else:
                dropped += len(item.text)
            continue
        used += len(item.text)
        out.append(item)
    if dropped:
        out.append(TextItem(f"…{_tokens(dropped)} tokens truncated…"))
    return out


def _tokens(chars: int) -> int:
    return (chars + _CHARS_PER_TOKEN - 1) // _CHARS_PER_TOKEN
