"""What parsing a shell script yields (its simple commands and the problems that keep it
from being checked), and how deep a nested script is: a leaf module shared by the parser
(``shell_parse``), what looks through wrappers (``unwrap``, ``unwrap_builtins``,
``nested_scripts``) and the checks. ``unwrap`` is called by the parser and parses the
scripts a command runs (``bash -c``); it gets the parser through ``Nesting`` instead of
importing it, so the recursion has no import cycle."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from codemode.sandbox.execpolicy.words import Word

# What a command reads on standard input, as far as the parser can tell: ("file", path),
# ("text", here-document or here-string), ("pipe-text", what an echo before it prints)
# or ("pipe", None), from a command whose output is unknown.
Stdin = tuple[str, Word | None]

# Scripts nested deeper than this (bash -c inside bash -c ...) are not followed.
MAX_DEPTH = 8


@dataclass(frozen=True)
class SimpleCommand:
    """One command bash would execute, with its words unquoted."""

    words: tuple[Word, ...]
    source: str  # the text as written in the script
    open_ended: bool = False  # more arguments are added at run time (xargs, find -exec)
    writes: tuple[str, ...] = ()  # files its output is redirected to
    write_words: tuple[Word, ...] = ()  # the same, as words (for the device check)
    reads: tuple[Word, ...] = ()  # files it opens through `<`, `<>` or `<&FILE`
    via: tuple[str, ...] = ()  # wrappers looked through to reach it (env, sudo, bash -c...)
    strict_only: bool = False  # a wrapper's own words: only prompt/forbidden rules apply

    @property
    def name(self) -> Word:
        return self.words[0]

    def display(self) -> str:
        """The command as bash would run it (unknowable words as written)."""
        shown = [w.text if w.kind == "dynamic" else shlex.quote(w.text) for w in self.words]
        return " ".join(shown) + (" ..." if self.open_ended else "")


@dataclass(frozen=True)
class Problem:
    """Something that keeps a script from being checked; it always needs approval."""

    source: str
    reason: str


@dataclass
class ParsedScript:
    commands: list[SimpleCommand] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # literal values the script assigns to each variable (to resolve `> $dev`)
    literals: dict[str, set[str]] = field(default_factory=dict)

    def extend(self, other: ParsedScript) -> None:
        self.commands.extend(other.commands)
        self.problems.extend(other.problems)
        for name, values in other.literals.items():
            self.literals.setdefault(name, set()).update(values)


class ScriptParser(Protocol):
    """``shell_parse.parse_script``."""

    def __call__(self, script: str, *, depth: int = 0) -> ParsedScript: ...


@dataclass(frozen=True)
class Nesting:
    """How deep the command being looked through is nested, and the parser for the
    scripts it runs (one level deeper)."""

    depth: int
    parse: ScriptParser

    def parse_inner(self, script: str) -> ParsedScript:
        return self.parse(script, depth=self.depth + 1)


def with_words(cmd: SimpleCommand, words: list[Word], **changes: Any) -> SimpleCommand:
    return replace(cmd, words=tuple(words), **changes)
