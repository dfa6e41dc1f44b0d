"""Looking through commands that run other commands.

``bash -c SCRIPT`` (and ``sh``, ``zsh``...) is parsed recursively, as are ``eval``, here-
documents fed to a shell and ``find -exec``. Wrappers such as ``env``, ``sudo``,
``xargs``, ``timeout`` or ``nice`` (table in ``wrappers.toml``) are stripped of their
own options to reach the command they run. ``git``'s global options are dropped so that
``git -C dir push --force`` reads as ``git push --force``.

Each wrapper also stays in the result as a *strict-only* command, so a rule such as
``prefix_rule(pattern=["sudo"], decision="prompt")`` still applies, while an ``allow``
for the wrapper alone can never let an unchecked inner command through.
"""

from __future__ import annotations

import functools
import os.path
import tomllib
from importlib import resources
from typing import Any

from codemode.sandbox.shell_parse import (
    ParsedScript,
    Problem,
    SimpleCommand,
    parse_script,
    with_words,
)
from codemode.sandbox.words import Word

_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds"}
)
# Global git options through which configuration can name programs for git to run.
_GIT_RISKY_OPTIONS = frozenset({"-c", "--config-env", "--exec-path"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


@functools.cache
def wrapper_table() -> dict[str, Any]:
    text = resources.files("codemode.sandbox").joinpath("wrappers.toml").read_text("utf-8")
    return tomllib.loads(text)


def shells() -> frozenset[str]:
    return frozenset(wrapper_table()["shells"])


def base_name(word: Word) -> str:
    return os.path.basename(word.text) if word.literal else ""


def expand(cmd: SimpleCommand, *, depth: int, stdin: Any = None) -> ParsedScript:
    """``cmd`` and whatever it runs, as a list of simple commands plus any problems."""
    out = ParsedScript()
    if not cmd.words:
        return out
    name = cmd.words[0]
    if not name.literal:
        out.problems.append(
            Problem(cmd.source, f"the command name {name.text!r} is only known at run time")
        )
        return out
    base = base_name(name)
    table = wrapper_table()
    if base in shells():
        return _shell(cmd, depth, stdin)
    if base == "eval":
        return _script_of(cmd, cmd.words[1:], depth, "eval")
    if base == "trap":
        return _trap(cmd, depth)
    if base == "find":
        return _find(cmd, depth)
    if base == "git":
        return _git(cmd)
    if base in table and isinstance(table[base], dict):
        return _wrapper(cmd, table[base], depth)
    out.commands.append(cmd)
    return out


def _script_of(
    cmd: SimpleCommand,
    words: tuple[Word, ...] | list[Word],
    depth: int,
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
    inner = parse_script(" ".join(w.text for w in words), depth=depth + 1)
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
    )


def _shell(cmd: SimpleCommand, depth: int, stdin: Any) -> ParsedScript:
    words = cmd.words
    base = base_name(words[0])
    command_mode = False
    read_stdin = False
    i = 1
    while i < len(words):
        w = words[i]
        if not w.literal:
            if command_mode:
                break
            out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
            why = f"{base} option {w.text} is only known at run time"
            out.problems.append(Problem(cmd.source, why))
            return out
        t = w.text
        if t in ("--", "-"):
            i += 1
            break
        if t.startswith("--"):
            i += 2 if t in ("--rcfile", "--init-file") else 1
            continue
        if len(t) > 1 and t[0] in "-+":
            flags = t[1:]
            command_mode = command_mode or "c" in flags
            read_stdin = read_stdin or "s" in flags
            i += 1 + sum(1 for f in flags if f in "oO")
            continue
        break
    rest = words[i:]
    if command_mode:
        if not rest:
            return ParsedScript([cmd])
        return _script_of(cmd, rest[:1], depth, base)
    if rest and not read_stdin:
        return ParsedScript([cmd])  # `bash script.sh`: a script file, judged as a command
    kind, value = stdin if stdin else (None, None)
    if kind == "text":
        return _script_of(cmd, [value], depth, base)
    if kind == "pipe":
        out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
        out.problems.append(
            Problem(cmd.source, f"{base} runs commands piped into it, which cannot be checked")
        )
        return out
    return ParsedScript([cmd])


def _wrapper(cmd: SimpleCommand, spec: dict[str, Any], depth: int) -> ParsedScript:
    words = cmd.words
    base = base_name(words[0])
    value_options = set(spec.get("value_options", []))
    script_options = set(spec.get("script_options", []))
    stops = set(spec.get("not_wrapping_options", []))
    out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
    i = 1
    while i < len(words):
        w = words[i]
        if not w.literal:
            if w.text.startswith("-") or spec.get("assignments"):
                out.problems.append(
                    Problem(cmd.source, f"{base} option {w.text} is only known at run time")
                )
                return out
            break
        t = w.text
        if t == "--":
            i += 1
            break
        if spec.get("assignments") and "=" in t and t.split("=", 1)[0].isidentifier():
            i += 1
            continue
        if not t.startswith("-") or t == "-":
            break
        option, eq, attached = t.partition("=")
        short = not t.startswith("--")
        if short and len(t) > 2 and t[:2] in value_options | script_options:
            option, attached, eq = t[:2], t[2:], "="
        if option in stops:
            return ParsedScript([cmd])
        if option in script_options:
            if eq:
                value, i = Word(attached) if w.literal else w, i + 1
            elif i + 1 < len(words):
                value, i = words[i + 1], i + 2
            else:
                break
            inner = _script_of(
                cmd, [value, *words[i:]] if base == "env" else [value], depth, base, record=False
            )
            out.extend(inner)
            if base == "env" or not spec.get("runs_command", True):
                return out
            continue
        i += 1 if eq else (2 if option in value_options else 1)
    if not spec.get("runs_command", True):
        return out
    i += spec.get("positionals", 0)
    inner_words = list(words[i:])
    if spec.get("joins_to_shell"):
        out.extend(_script_of(cmd, inner_words, depth, base, record=False))
        return out
    if not inner_words:
        default = spec.get("default")
        if not default:
            return ParsedScript([cmd])  # e.g. `env` alone prints the environment
        inner_words = [Word(d) for d in default]
    inner = with_words(
        cmd,
        inner_words,
        via=(base, *cmd.via),
        open_ended=cmd.open_ended or bool(spec.get("open_ended")),
    )
    out.extend(expand(inner, depth=depth))
    return out


def _trap(cmd: SimpleCommand, depth: int) -> ParsedScript:
    """``trap SCRIPT SIGNAL...`` runs SCRIPT later, in this shell."""
    args = [w for w in cmd.words[1:] if not (w.literal and w.text in ("--", "-p", "-l", "-P"))]
    if len(args) < 2 or (args[0].literal and args[0].text == "-"):
        return ParsedScript([cmd])
    return _script_of(cmd, args[:1], depth, "trap")


def _find(cmd: SimpleCommand, depth: int) -> ParsedScript:
    out = ParsedScript([cmd])
    words = list(cmd.words)
    i = 1
    while i < len(words):
        if words[i].literal and words[i].text in _FIND_EXEC:
            j = i + 1
            while j < len(words) and not (words[j].literal and words[j].text in (";", "+")):
                j += 1
            inner_words = [
                Word(w.text, "dynamic") if w.literal and "{}" in w.text else w
                for w in words[i + 1 : j]
            ]
            if inner_words:
                inner = with_words(cmd, inner_words, via=("find", *cmd.via))
                out.extend(expand(inner, depth=depth))
            i = j + 1
            continue
        i += 1
    return out


def _git(cmd: SimpleCommand) -> ParsedScript:
    words = list(cmd.words)
    out = ParsedScript()
    i = 1
    while i < len(words) and words[i].text.startswith("-"):
        w = words[i]
        option = w.text.partition("=")[0]
        if not w.literal or option in _GIT_RISKY_OPTIONS:
            out.commands.append(with_words(cmd, words, strict_only=True))
            out.problems.append(
                Problem(cmd.source, f"git {option} can make git run arbitrary programs")
            )
            return out
        i += 2 if w.text in _GIT_VALUE_OPTIONS else 1
    if i == 1:
        out.commands.append(cmd)
    else:
        out.commands.append(with_words(cmd, [words[0], *words[i:]]))
    return out
