"""Scripts a command runs (``bash -c SCRIPT``, ``eval``, ``trap``, a git alias...),
parsed one level deeper with the parser ``Nesting`` carries; each inner command is
tagged with the wrapper it was reached through."""

from __future__ import annotations

from codemode.sandbox.execpolicy.script_types import (
    Nesting,
    ParsedScript,
    Problem,
    SimpleCommand,
    with_words,
)
from codemode.sandbox.execpolicy.words import Word


def script_of(
    cmd: SimpleCommand,
    words: tuple[Word, ...] | list[Word],
    nesting: Nesting,
    via: str,
    *,
    record: bool = True,
) -> ParsedScript:
    """Parse ``words`` joined by spaces as a script that ``cmd`` runs."""
    out = ParsedScript()
    if record:
        out.commands.append(with_words(cmd, list(cmd.words), strict_only=True))
    dynamic = [w for w in words if not w.literal]
    if dynamic:
        out.problems.append(
            Problem(cmd.source, f"{via} runs a script only known at run time ({dynamic[0].text})")
        )
        return out
    inner = nesting.parse_inner(" ".join(w.text for w in words))
    out.problems.extend(inner.problems)
    out.commands.extend(_tag(c, via, cmd) for c in inner.commands)
    return out


def _tag(inner: SimpleCommand, via: str, outer: SimpleCommand) -> SimpleCommand:
    return with_words(
        inner,
        list(inner.words),
        via=(via, *inner.via),
        open_ended=inner.open_ended or outer.open_ended,
        writes=inner.writes + outer.writes,
        write_words=inner.write_words + outer.write_words,
    )
