"""Looking through commands that run other commands.

``bash -c SCRIPT`` (and ``sh``, ``zsh``...) is parsed recursively, as are ``eval``, here-
documents fed to a shell and ``find -exec``. Wrappers such as ``env``, ``sudo``,
``xargs``, ``timeout`` or ``nice`` (table in ``wrappers.toml``) are stripped of their
own options to reach the command they run. ``git``'s global options are dropped so that
``git -C dir push --force`` reads as ``git push --force``.

Builtins that take code as data (``alias NAME=VALUE``, ``hash -p PATH NAME``,
``mapfile -C CALLBACK``, ``compgen -C``/``complete -C``) have their payload parsed the
same way; the builtin itself is judged too (it needs approval: see ``always_prompt`` in
``safe_commands.toml``), so a forbidden payload stays forbidden and any other one asks.

Each wrapper also stays in the result as a *strict-only* command, so a rule such as
``prefix_rule(pattern=["sudo"], decision="prompt")`` still applies, while an ``allow``
for the wrapper alone can never let an unchecked inner command through.
"""

from __future__ import annotations

import re
from typing import Any

from codemode.sandbox.execpolicy import env_split, unwrap_builtins, unwrap_shells
from codemode.sandbox.execpolicy.nested_scripts import script_of
from codemode.sandbox.execpolicy.script_types import (
    Nesting,
    ParsedScript,
    Problem,
    SimpleCommand,
    Stdin,
    with_words,
)
from codemode.sandbox.execpolicy.variables import risky_variable
from codemode.sandbox.execpolicy.words import Word, base_name

# Re-exported: the wrapper table is read in a leaf module the parser shares.
from codemode.sandbox.execpolicy.wrapper_table import long_option
from codemode.sandbox.execpolicy.wrapper_table import shells as shells
from codemode.sandbox.execpolicy.wrapper_table import wrapper_table as wrapper_table

_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
MAX_WRAPPERS = 32


def expand(cmd: SimpleCommand, *, nesting: Nesting, stdin: Stdin | None = None) -> ParsedScript:
    """``cmd`` and whatever it runs, as a list of simple commands plus any problems."""
    out = ParsedScript()
    if not cmd.words:
        return out
    name = cmd.words[0]
    if not name.literal:
        out.problems.append(
            Problem(cmd.source, f"the command name {name.text!r} is only known at run time")
        )
        if name.kind == "glob":  # /sbin/mkfs.e* : the forbidden names it may match count
            out.commands.append(with_words(cmd, list(cmd.words), strict_only=True))
        return out
    if len(cmd.via) > MAX_WRAPPERS:  # `env env env ... ls`: no RecursionError
        out.problems.append(Problem(cmd.source, f"more than {MAX_WRAPPERS} wrappers deep"))
        out.commands.append(with_words(cmd, list(cmd.words), strict_only=True))
        return out
    if name.text in ("{", "!") and len(cmd.words) > 1:
        # `time { CMD; }`, `! { CMD; }`: tree-sitter reads the braces as words
        inner = [w for w in cmd.words[1:] if not (w.literal and w.text == "}")]
        out.commands.append(with_words(cmd, list(cmd.words), strict_only=True))
        out.extend(expand(with_words(cmd, inner), nesting=nesting))
        return out
    base = base_name(name)
    table = wrapper_table()
    if base in shells():
        return unwrap_shells.shell(cmd, nesting, stdin)
    if stdin and stdin[0] != "file" and unwrap_builtins.reads_code(base, cmd.words[1:]):
        return unwrap_builtins.code_on_stdin(cmd, base, stdin, nesting)
    if base == "eval":
        return script_of(cmd, cmd.words[1:], nesting, "eval")
    if base == "trap":
        return _trap(cmd, nesting)
    if base == "coproc":
        # `coproc NAME { CMDS; }`: tree-sitter reads the braces as words
        words = list(cmd.words)
        start = (
            2
            if len(words) > 2 and words[2].text == "{"
            else (1 if len(words) > 1 and words[1].text == "{" else 0)
        )
        if start:
            inner = [w for w in words[start + 1 :] if w.text != "}"]
            out.commands.append(with_words(cmd, words, strict_only=True))
            if inner:
                inner_cmd = with_words(cmd, inner, via=("coproc", *cmd.via))
                out.extend(expand(inner_cmd, nesting=nesting))
            return out
    if base == "find":
        return _find(cmd, nesting)
    if base == "git":
        return unwrap_builtins.git(cmd, nesting)
    if base in unwrap_builtins.PAYLOAD_BUILTINS:
        return unwrap_builtins.payload_builtin(cmd, base, nesting)
    if base in table and isinstance(table[base], dict):
        return _wrapper(cmd, table[base], nesting)
    out.commands.append(cmd)
    return out


def _plain_arguments(
    words: list[Word] | tuple[Word, ...], takes_value: set[str]
) -> tuple[str, ...]:
    """The words after the command name that are neither options nor their values."""
    plain: list[str] = []
    skip = False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w.text.startswith("-"):
            skip = w.literal and w.text in takes_value
            continue
        plain.append(w.text)
    return tuple(plain)


def _wrapper(cmd: SimpleCommand, spec: dict[str, Any], nesting: Nesting) -> ParsedScript:
    words = cmd.words
    base = base_name(words[0])
    value_options = set(spec.get("value_options", []))
    script_options = set(spec.get("script_options", []))
    stops = set(spec.get("not_wrapping_options", []))
    shell_options = set(spec.get("shell_options", []))
    output_options = set(spec.get("output_options", []))
    pair_options = set(spec.get("pair_options", []))
    command_options = set(spec.get("command_options", []))
    command_keys = {k.lower() for k in spec.get("command_keys", [])}
    takes_value = value_options | script_options | output_options | command_options
    replace_options = set(spec.get("replace_options", []))
    replace: str | None = None  # xargs -I{}: the words holding it are input at run time
    out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
    writes: list[str] = []
    joined = bool(spec.get("joins_to_shell"))
    script: list[Word] | None = None

    def handle(option: str, value: Word | None, i: int) -> None:
        nonlocal script, replace
        if value is None:
            return
        if option in replace_options:
            replace = value.text
        if option in output_options:
            writes.append(value.text)
        if option in command_options:
            key, _, payload = _key_value(value.text)
            if key.lower() in command_keys:
                out.extend(script_of(cmd, [Word(payload, value.kind)], nesting, base, record=False))
                out.problems.append(Problem(cmd.source, f"{base} {option} {key} runs a command"))
        if option in script_options and script is None:
            script = [value, *words[i:]] if base == "env" else [value]

    i = 1
    while i < len(words) and script is None:
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
        if spec.get("assignments") and t.startswith("BASH_FUNC_") and "%%=" in t:
            # `env 'BASH_FUNC_ls%%=() { CMD; }' bash -c ls`: bash defines ls from it
            out.problems.append(Problem(cmd.source, f"{base} exports a bash function"))
            body = t.partition("=")[2].removeprefix("()")
            out.extend(script_of(cmd, [Word(body)], nesting, base, record=False))
            i += 1
            continue
        if spec.get("assignments") and "=" in t and t.split("=", 1)[0].isidentifier():
            name, assigned = t.split("=", 1)
            if risky_variable(name):
                out.problems.append(
                    Problem(cmd.source, f"{base} sets {name}, which changes what runs")
                )
                if assigned.strip("|: "):
                    named = Word(assigned.lstrip("|"))
                    out.extend(script_of(cmd, [named], nesting, base, record=False))
            i += 1
            continue
        if not t.startswith("-") or t == "-":
            break
        if t.startswith("--"):
            option, eq, attached = t.partition("=")
            option = long_option(option, spec)  # --sp: --split-string
            if option in stops:
                return ParsedScript([cmd])
            i += 1
            if option in replace_options and option not in takes_value:
                replace = attached if eq else spec.get("replace_default", "{}")
            if option in shell_options:
                joined = True
            elif option in pair_options:
                i += 2
            elif option in takes_value:
                value = Word(attached) if eq else (words[i] if i < len(words) else None)
                i += 0 if eq else 1
                handle(option, value, i)
            continue
        i += 1
        for j in range(1, len(t)):
            option = "-" + t[j]
            if option in stops:
                return ParsedScript([cmd])
            if option in replace_options and option not in takes_value:
                replace = t[j + 1 :] or spec.get("replace_default", "{}")
                break
            if option in shell_options:
                joined = True
            elif option in takes_value:
                rest = t[j + 1 :]
                value = Word(rest) if rest else (words[i] if i < len(words) else None)
                i += 0 if rest else 1
                handle(option, value, i)
                break
    if script is None and spec.get("script_anywhere"):
        for k in range(i, len(words)):
            w = words[k]
            if w.literal and w.text in script_options and k + 1 < len(words):
                script = [words[k + 1]]
                break
            if w.literal and w.text[:2] in script_options and len(w.text) > 2:
                script = [Word(w.text[2:])]
                break
    if writes:
        out.commands[0] = with_words(
            cmd,
            list(words),
            strict_only=True,
            writes=cmd.writes + tuple(writes),
            write_words=cmd.write_words + tuple(Word(t) for t in writes),
        )
    if spec.get("positional_outputs"):  # script [-c CMD] FILE: FILE is written
        files = _plain_arguments(words, takes_value)
        cmd = with_words(
            cmd,
            list(words),
            writes=cmd.writes + files,
            write_words=cmd.write_words + tuple(Word(t) for t in files),
        )
        out.commands[0] = with_words(
            out.commands[0],
            list(words),
            strict_only=True,
            writes=out.commands[0].writes + files,
            write_words=out.commands[0].write_words + tuple(Word(t) for t in files),
        )
    if script is not None:
        out.extend(script_of(cmd, script, nesting, base, record=False))
        if base == "env":  # env's own splitting too: `env -S 'rm\_-rf\_~'`
            out.extend(_env_split(cmd, script, nesting))
        return out
    if not spec.get("runs_command", True):
        if len(out.commands) == 1 and not out.problems:
            # `script FILE` (a shell, logging to FILE), `su`: judged as the command they
            # are, never dropped as if they ran nothing
            return ParsedScript([cmd])
        return out
    i += spec.get("positionals", 0)
    inner_words = list(words[i:])
    if joined:
        if inner_words:
            out.extend(script_of(cmd, inner_words, nesting, base, record=False))
        return out
    if replace:
        inner_words = [Word(w.text, "dynamic") if replace in w.text else w for w in inner_words]
    if not inner_words and cmd.open_ended:
        # `xargs env`, `xargs timeout 1`: the command itself arrives at run time
        out.problems.append(Problem(cmd.source, f"{base} runs a command from its input"))
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
        writes=cmd.writes + tuple(writes),  # `time -o FILE ls` writes FILE
        write_words=cmd.write_words + tuple(Word(t) for t in writes),
    )
    out.extend(expand(inner, nesting=nesting))
    return out


def _env_split(cmd: SimpleCommand, script: list[Word], nesting: Nesting) -> ParsedScript:
    """The command ``env -S STRING ARGS...`` runs, split by env's rules."""
    head = script[0]
    split = env_split.split(head.text) if head.literal else None
    if split is None:
        if not head.literal:
            return ParsedScript()  # the script's own reading asks already
        return ParsedScript(problems=[Problem(cmd.source, "env -S string env cannot split")])
    if not split and not script[1:]:
        return ParsedScript()
    inner = with_words(cmd, [*split, *script[1:]], via=("env", *cmd.via))
    return expand(inner, nesting=nesting)


def _key_value(text: str) -> tuple[str, str, str]:
    """``Key=value`` or ``Key value`` (ssh -o accepts both)."""
    m = re.match(r"\s*([^=\s]+)\s*(?:=|\s)\s*(.*)", text, re.S)
    return (m.group(1), "=", m.group(2)) if m else (text, "", "")


def _trap(cmd: SimpleCommand, nesting: Nesting) -> ParsedScript:
    """``trap SCRIPT SIGNAL...`` runs SCRIPT later, in this shell."""
    args = [w for w in cmd.words[1:] if not (w.literal and w.text in ("--", "-p", "-l", "-P"))]
    if len(args) < 2 or (args[0].literal and args[0].text == "-"):
        return ParsedScript([cmd])
    return script_of(cmd, args[:1], nesting, "trap")


def _find(cmd: SimpleCommand, nesting: Nesting) -> ParsedScript:
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
                out.extend(expand(inner, nesting=nesting))
            i = j + 1
            continue
        i += 1
    return out
