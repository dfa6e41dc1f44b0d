"""Turning what a model (or a person) wrote into a script the isolate can run."""

from __future__ import annotations

import re
from typing import NamedTuple

_FENCE_OPEN = re.compile(r"^\s*```[\w+-]*[ \t]*\n")
_FENCE_CLOSE = re.compile(r"\n[ \t]*```\s*$")

# The program becomes the body of an async arrow function, so top-level `await` and
# `return` work. The program starts on the wrapper's second line and keeps its columns.
_STATEMENTS = "__cm.start((async () => {{\n{code}\n}})());"
_EXPRESSION = "__cm.start((async () => (\n{code}\n))());"
WRAPPER_LINES = 1


class Program(NamedTuple):
    """A program ready to run, and how to map engine positions back to the user's text.

    (A named tuple, not a dataclass: it is made at every start of the code-mode host,
    which Codex waits for, and a dataclass costs several times as much to define.)"""

    code: str
    line_offset: int  # lines removed before `code` (a stripped opening fence)

    @property
    def line_count(self) -> int:
        return self.code.count("\n") + 1

    def as_statements(self) -> str:
        return _STATEMENTS.format(code=self.code)

    def as_expression(self) -> str:
        return _EXPRESSION.format(code=self.code)

    def might_be_expression(self) -> bool:
        """Cheap pre-check before trying the expression form: no statement keyword at
        the start and no top-level `;` separating statements."""
        stripped = self.code.strip().rstrip(";")
        if not stripped or ";" in stripped:
            return False
        return not re.match(
            r"(const|let|var|function|class|if|for|while|do|try|switch|return|throw|import"
            r"|export|async\s+function)\b",
            stripped,
        )


def prepare(source: str) -> Program:
    """Strip markdown fences around a program (models add them) and normalise newlines.

    Lone surrogates (a model's JSON can carry ``"\\ud800"`` into the source) become
    U+FFFD: no engine takes them, and the runtime's output treats them the same way.
    """
    text = source.replace("\r\n", "\n")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    offset = 0
    opened = _FENCE_OPEN.match(text)
    if opened:
        offset = text[: opened.end()].count("\n")
        text = text[opened.end() :]
        closed = _FENCE_CLOSE.search(text)
        if closed:
            text = text[: closed.start()]
        elif text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return Program(code=text, line_offset=offset)
