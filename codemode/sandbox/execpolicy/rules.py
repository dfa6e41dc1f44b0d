"""Execpolicy rules in Codex's ``.rules`` format, read without ever running the file.

A rules file is Starlark-like: a sequence of calls with named, literal arguments::

    prefix_rule(
        pattern = ["git", ["push", "fetch"]],   # a list inside the list: alternatives
        decision = "prompt",                   # allow (the default) | prompt | forbidden
        justification = "talks to a remote",
        match = [["git", "push"], "git fetch origin"],   # checked when the file loads
        not_match = ["git status"],
    )
    host_executable(name = "git", paths = ["/usr/bin/git"])

The file is parsed with Python's ``ast`` and only literal strings, numbers, booleans and
lists are accepted, so nothing in it is evaluated (``rules_file``). This module holds
the rules and how a command matches them.

Two codemode extensions to ``prefix_rule`` (not understood by Codex) let the built-in
defaults look past the prefix: ``any_argument=[GLOB, ...]`` (the rule applies only when
some later argument matches one of the globs) and ``no_argument=[GLOB, ...]`` (only when
none does). A third, ``allow_command(command="...")``, allows one exact command line and
nothing else: that is what answering "always" to an approval stores by default.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codemode.sandbox.execpolicy.words import Word

Decision = Literal["allow", "prompt", "forbidden"]
DECISIONS: tuple[Decision, ...] = ("allow", "prompt", "forbidden")
Layer = Literal["default", "user", "repo"]
MatchLevel = Literal["no", "maybe", "yes"]
_LEVEL = {"no": 0, "maybe": 1, "yes": 2}

# A command named by an absolute path in one of these counts as the bare name for
# `allow` rules; any other path must be listed by host_executable().
TRUSTED_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin"})


def _weakest(*levels: MatchLevel) -> MatchLevel:
    return min(levels, key=_LEVEL.__getitem__)


@dataclass(frozen=True)
class PrefixRule:
    """One ``prefix_rule``: a command prefix (with alternatives) and a decision."""

    pattern: tuple[tuple[str, ...], ...]
    decision: Decision = "allow"
    justification: str | None = None
    any_argument: tuple[str, ...] = ()
    no_argument: tuple[str, ...] = ()
    source: str = "<memory>"  # "path:line"
    layer: Layer = "user"

    def describe(self, *, short: bool = False) -> str:
        """The rule as it would be written in a rules file (one line); ``short`` cuts long
        lists of alternatives."""

        def token(alts: tuple[str, ...]) -> Any:
            if len(alts) == 1:
                return alts[0]
            return [*alts[:5], f"... {len(alts) - 5} more"] if short and len(alts) > 6 else alts

        parts = [f"pattern={starlark([token(a) for a in self.pattern])}"]
        parts.append(f"decision={starlark(self.decision)}")
        if self.any_argument:
            parts.append(f"any_argument={starlark(list(self.any_argument))}")
        if self.no_argument:
            parts.append(f"no_argument={starlark(list(self.no_argument))}")
        return f"prefix_rule({', '.join(parts)})"

    def match(
        self,
        words: Sequence[Word],
        *,
        open_ended: bool = False,
        executables: dict[str, tuple[str, ...]] | None = None,
    ) -> MatchLevel:
        """Whether the command ``words`` matches: yes, no, or maybe (words only known at
        run time could make it match)."""
        if not words or not self.pattern:
            return "no"
        level = self._name_level(words[0], executables or {})
        if level == "no":
            return "no"
        pos = 1
        for alternatives in self.pattern[1:]:
            if pos >= len(words):
                return _weakest(level, "maybe") if open_ended else "no"
            w = words[pos]
            if w.literal:
                if w.text not in alternatives:
                    return "no"
            elif w.splits:
                # Could be any number of words: the rest of the pattern may match.
                return _weakest(level, self._argument_level(words[pos:], open_ended, True))
            else:
                level = _weakest(level, "maybe")
            pos += 1
        return _weakest(level, self._argument_level(words[pos:], open_ended, False))

    def _name_level(self, name: Word, executables: dict[str, tuple[str, ...]]) -> MatchLevel:
        if not name.literal:
            return "maybe"
        first = self.pattern[0]
        if name.text in first:
            return "yes"
        if "/" not in name.text:
            return "no"
        base = os.path.basename(name.text)
        if base not in first:
            return "no"
        trusted = os.path.dirname(os.path.normpath(name.text)) in TRUSTED_BIN_DIRS
        if trusted or name.text in executables.get(base, ()):
            return "yes"
        # An unknown binary of that name: a strict rule should still catch it.
        return "yes" if self.decision != "allow" else "no"

    def _argument_level(self, rest: Sequence[Word], open_ended: bool, shifted: bool) -> MatchLevel:
        level: MatchLevel = "yes"
        unknown = open_ended or shifted or any(not w.literal for w in rest)
        literal = [w.text for w in rest if w.literal]
        if self.any_argument:
            if any(_fnmatch_any(t, self.any_argument) for t in literal):
                pass
            elif unknown:
                level = "maybe"
            else:
                return "no"
        if self.no_argument:
            if any(_fnmatch_any(t, self.no_argument) for t in literal):
                return "no"
            if unknown:
                level = "maybe"
        return level


def _fnmatch_any(text: str, globs: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(text, g) for g in globs)


@dataclass(frozen=True)
class ExactRule:
    """``allow_command(command=...)``: exactly this command line, nothing more."""

    command: str
    source: str = "<memory>"
    layer: Layer = "user"

    def describe(self) -> str:
        return f"allow_command(command={starlark(self.command)})"


@dataclass
class RuleSet:
    """The rules of one layer (built-in defaults, the user's, the repository's)."""

    rules: list[PrefixRule] = field(default_factory=list)
    executables: dict[str, tuple[str, ...]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    exact: list[ExactRule] = field(default_factory=list)
    _index: tuple[int, dict[str, list[PrefixRule]]] | None = field(
        default=None, repr=False, compare=False
    )

    def rules_named(self, name: str) -> list[PrefixRule]:
        """The rules whose first token may match a command whose base name is ``name``."""
        if self._index is None or self._index[0] != len(self.rules):
            index: dict[str, list[PrefixRule]] = {}
            for rule in self.rules:
                for alt in dict.fromkeys(os.path.basename(a) for a in rule.pattern[0]):
                    index.setdefault(alt, []).append(rule)
            self._index = (len(self.rules), index)
        return self._index[1].get(name, [])

    def extend(self, other: RuleSet) -> None:
        self.rules.extend(other.rules)
        self.exact.extend(other.exact)
        for name, paths in other.executables.items():
            self.executables[name] = self.executables.get(name, ()) + paths
        self.files.extend(other.files)


def starlark(value: object) -> str:
    # JSON strings and lists are valid Starlark (and Python) literals.
    return json.dumps(value, ensure_ascii=False)
