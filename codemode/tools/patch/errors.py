"""How a rejected patch is reported: one message a model can act on, nothing changed."""

from __future__ import annotations

from importlib.resources import files

from codemode.tool_terms.errors import ToolError

HEADLINE = "apply_patch: the patch was not applied; no file was changed."
PARTIAL_HEADLINE = "apply_patch: the patch failed partway and could not be fully undone."


class PatchError(ToolError):
    """A patch that could not be applied. Raised before any file is touched (or after
    every write already made has been rolled back), so the workspace is as it was.

    ``problems`` holds one self-contained paragraph per failure: the file, the chunk,
    what was expected and what the file actually has.
    """

    def __init__(
        self,
        problems: str | list[str],
        *,
        show_format: bool = False,
        headline: str = HEADLINE,
    ) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.show_format = show_format
        self.headline = headline
        super().__init__(self.render())

    def render(self) -> str:
        parts = [self.headline, *self.problems]
        if self.show_format:
            parts.append(format_reminder())
        return printable("\n\n".join(parts))


def printable(text: str) -> str:
    """``text`` with bytes that were not UTF-8 (kept as surrogate escapes so files
    round-trip) shown as U+FFFD, so it can be printed and sent as JSON."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def format_reminder() -> str:
    """A short example of the expected format, shown with structural errors."""
    return files("codemode.tools.patch").joinpath("format.md").read_text(encoding="utf-8").strip()


def quote_lines(lines: list[str], limit: int = 16, first_number: int | None = None) -> str:
    """Lines indented for an error message, numbered when ``first_number`` is given;
    long runs keep their head and tail."""
    numbered = [
        (f"{first_number + i:>5} | " if first_number is not None else "    | ") + text
        for i, text in enumerate(lines)
    ]
    if len(numbered) > limit:
        half = limit // 2
        skipped = len(numbered) - 2 * half
        numbered = [*numbered[:half], f"      ... ({skipped} more lines)", *numbered[-half:]]
    return "\n".join(numbered)
