"""Looking through git's global options, builtins that store code to run later, and
interpreters that read their program on standard input (parts of ``unwrap``)."""

from __future__ import annotations

import os.path

from codemode.sandbox.execpolicy.findings import strings_in
from codemode.sandbox.execpolicy.nested_scripts import script_of
from codemode.sandbox.execpolicy.safe_args import git_runs, interpreters
from codemode.sandbox.execpolicy.script_types import (
    Nesting,
    ParsedScript,
    Problem,
    SimpleCommand,
    Stdin,
    with_words,
)
from codemode.sandbox.execpolicy.words import Word

_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds"}
)
# Global git options that point git at another repository.
_GIT_ELSEWHERE = frozenset({"-C", "--git-dir", "--work-tree"})
# Global git options through which configuration can name programs for git to run.
_GIT_RISKY_OPTIONS = frozenset({"--config-env", "--exec-path"})


def _git_payloads(words: list[Word]) -> list[tuple[list[Word], str]]:
    """Commands a git subcommand is told to run (``rebase --exec CMD``, ``submodule
    foreach CMD``...), from ``[git_runs]`` in safe_commands.toml."""
    if not words or not words[0].literal or words[0].text not in git_runs():
        return []
    sub = words[0].text
    out: list[tuple[list[Word], str]] = []
    args = words[1:]
    for k, w in enumerate(args):
        if not w.literal:
            continue
        for opt in git_runs()[sub]:
            why = f"git {sub} {opt.rstrip(':.')} runs a command"
            if opt.endswith("...") and w.text == opt[:-3]:
                out.append((list(args[k + 1 :]), why))
            elif opt.endswith(":"):
                name = opt[:-1]
                if w.text == name and k + 1 < len(args):
                    out.append(([args[k + 1]], why))
                elif w.text.startswith(name + "="):
                    out.append(([Word(w.text[len(name) + 1 :])], why))
                elif len(name) == 2 and w.text.startswith(name) and len(w.text) > 2:
                    out.append(([Word(w.text[2:])], why))
    return out


def git(cmd: SimpleCommand, nesting: Nesting) -> ParsedScript:
    """git without its global options; -c values decided as commands."""

    words = list(cmd.words)
    out = ParsedScript()
    i = 1
    risky = False
    # another repository, maybe one the model made, whose config may name programs
    # (core.fsmonitor runs for `git status`): judged by the rules, never `allow`
    elsewhere = False
    while i < len(words) and words[i].text.startswith("-"):
        w = words[i]
        option, eq, _ = w.text.partition("=")
        if not w.literal:
            out.problems.append(
                Problem(cmd.source, f"git option {w.text} is only known at run time")
            )
            risky = True
            break
        if option == "-c" or (option.startswith("-c") and len(option) > 2):
            setting = (
                w.text[2:]
                if len(w.text) > 2
                else (words[i + 1] if i + 1 < len(words) else Word(""))
            )
            setting = setting if isinstance(setting, Word) else Word(setting)
            key, _, value = setting.text.partition("=")
            out.problems.append(
                Problem(cmd.source, f"git -c {key} sets configuration that can run programs")
            )
            value = value.lstrip("!") if key.lower().startswith("alias.") else value
            out.extend(
                script_of(cmd, [Word(value, setting.kind)], nesting, "git -c", record=False)
            )
            risky = True
            i += 1 if len(w.text) > 2 else 2
            continue
        if option in _GIT_RISKY_OPTIONS and (option != "--exec-path" or eq):
            out.problems.append(
                Problem(cmd.source, f"git {option} can make git run arbitrary programs")
            )
            risky = True
        elif option in ("-p", "--paginate"):
            out.problems.append(Problem(cmd.source, f"git {option} runs a pager"))
            risky = True
        elif option in _GIT_ELSEWHERE:
            target = (
                words[i + 1] if not eq and i + 1 < len(words) else Word(w.text[len(option) + 1 :])
            )
            if option != "-C" or not target.literal or os.path.normpath(target.text) != ".":
                elsewhere = True
        i += 2 if w.text in _GIT_VALUE_OPTIONS else 1
    if i == 1:
        out.commands.append(cmd)
    elif elsewhere:
        out.commands.append(with_words(cmd, [words[0], *words[i:]], strict_only=True))
        out.commands.append(cmd)
    else:
        out.commands.append(with_words(cmd, [words[0], *words[i:]]))
    for payload, why in _git_payloads(words[i:]):
        out.problems.append(Problem(cmd.source, why))
        out.extend(script_of(cmd, payload, nesting, "git", record=False))
    if risky:
        out.commands.append(with_words(cmd, words, strict_only=True))
    return out


def reads_code(base: str, args: tuple[Word, ...] | list[Word]) -> bool:
    """An interpreter given no script file reads its program from standard input."""
    if base not in interpreters():
        return False
    plain = [w for w in args if not (w.literal and w.text.startswith("-") and w.text != "-")]
    return not plain or (plain[0].literal and plain[0].text == "-")


def code_on_stdin(cmd: SimpleCommand, base: str, stdin: Stdin, nesting: Nesting) -> ParsedScript:

    out = ParsedScript([cmd])
    out.problems.append(Problem(cmd.source, f"{base} runs code from its input"))
    kind, value = stdin
    if kind in ("text", "pipe-text") and value is not None and value.literal:
        for s in strings_in(value.text):
            if s.strip():
                out.extend(script_of(cmd, [Word(s)], nesting, base, record=False))
    return out


PAYLOAD_BUILTINS = frozenset(
    {"alias", "hash", "mapfile", "readarray", "compgen", "complete", "set"}
)


def _sets_keyword(args: list[Word]) -> bool:
    """Whether ``set ARGS`` may turn on ``keyword`` (-k): after it, ``ls LD_PRELOAD=x``
    puts LD_PRELOAD in ls's environment, which no later check would see."""
    for k, w in enumerate(args):
        if not w.literal:
            return True
        t = w.text
        if t in ("-o", "+o") and k + 1 < len(args):
            if not args[k + 1].literal or args[k + 1].text == "keyword":
                return True
        elif t.startswith("-") and not t.startswith("--") and "k" in t[1:]:
            return True
    return False


def payload_builtin(cmd: SimpleCommand, base: str, nesting: Nesting) -> ParsedScript:
    """Builtins that store code to run later: their payload is decided as a command."""

    out = ParsedScript([cmd])
    args = list(cmd.words[1:])
    payloads: list[Word] = []
    if base == "set":
        if _sets_keyword(args):
            why = "set -k makes later arguments environment variables of the command"
            out.problems.append(Problem(cmd.source, why))
        return out
    if base == "alias":
        for w in args:
            _, eq, value = w.text.partition("=")
            if eq and w.literal:
                payloads.append(Word(value))
            elif eq or not w.literal:
                payloads.append(Word(w.text, "dynamic"))
    elif base == "hash":
        for k, w in enumerate(args):
            if w.text == "-p" and k + 1 < len(args):
                payloads.append(args[k + 1])
    else:  # mapfile / readarray / compgen / complete: -C COMMAND
        for k, w in enumerate(args):
            if w.text == "-C" and k + 1 < len(args):
                payloads.append(args[k + 1])
            elif w.literal and w.text.startswith("-C") and len(w.text) > 2:
                payloads.append(Word(w.text[2:]))
    for p in payloads:
        out.extend(script_of(cmd, [p], nesting, base, record=False))
    return out
