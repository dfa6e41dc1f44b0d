"""Content items and error text, as Codex's client expects them from a host."""

from __future__ import annotations

import json
import re

from codemode.codex_host.session.model import ImageItem
from codemode.js_runtime.models import ExecError

# Codex's host names the program's module exec_main.mjs in stack frames.
_PROGRAM_FILE = re.compile(r"\bprogram\.js:")
_UNCAUGHT = "Uncaught "
_DETAILS = ("auto", "low", "high", "original")
# A UTF-16 surrogate on its own: a JavaScript string cut inside a pair (an emoji sliced
# in two) reaches the host as one, and UTF-8 (protobuf's strings, the framed JSON) cannot
# carry it: encoding it failed the whole RPC or frame.
_SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, as JavaScript's
    ``toWellFormed()`` does (Python's strings hold a valid pair as one character)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def error_text(error: ExecError) -> str:
    """The text after "Script error:": the error and where it happened in the program.

    A thrown value that is not an Error (a failed tool call's message is a string) is
    shown as its text, as Codex's host shows it."""
    return well_formed(_error_text(error))


def _error_text(error: ExecError) -> str:
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
