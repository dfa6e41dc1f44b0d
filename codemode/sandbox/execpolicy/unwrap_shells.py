"""Looking through a shell that runs a script: ``bash -c SCRIPT`` (its positional
parameters filled in when they are known), a here-document, here-string or pipe fed to
a shell; the script is parsed recursively (``nested_scripts``). ``bash script.sh`` is a
script file, judged as the command it is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from codemode.sandbox.execpolicy.nested_scripts import script_of
from codemode.sandbox.execpolicy.script_types import (
    Nesting,
    ParsedScript,
    Problem,
    SimpleCommand,
    Stdin,
    with_words,
)
from codemode.sandbox.execpolicy.words import Word, base_name

# $0..$9, ${N}, $@, $*, ${@}, ${*} in a `bash -c` script: the arguments after it.
_POSITIONAL = re.compile(r"\$(?:\{(\d+)\}|(\d)|\{[@*]\}|[@*])")


def _with_positionals(script: Word, args: Sequence[Word]) -> Word | None:
    """``bash -c SCRIPT A0 A1 ...``: SCRIPT with its positional parameters replaced by
    the literal arguments (``bash -c '$0 $1' mkfs.ext4 /dev/sda`` runs ``mkfs.ext4
    /dev/sda``), or None when it names none or an argument is only known at run time.
    Replacing text over-approximates word splitting, which is the safe side to err on."""
    if not args or not script.literal or not _POSITIONAL.search(script.text):
        return None
    if any(not a.literal for a in args):
        return None
    values = [a.text for a in args]
    # "$@" is each argument as a word of its own
    each = " ".join(shlex.quote(v) for v in values[1:])
    text = script.text.replace('"$@"', each).replace('"${@}"', each)

    def value(m: re.Match[str]) -> str:
        n = m.group(1) or m.group(2)
        if n is None:
            return " ".join(values[1:])
        return values[int(n)] if int(n) < len(values) else ""

    return Word(_POSITIONAL.sub(value, text))


def shell(cmd: SimpleCommand, nesting: Nesting, stdin: Stdin | None) -> ParsedScript:
    """``bash -c SCRIPT``, ``sh -s``, a script piped or fed to a shell: what it runs."""
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
        if t in ("--rcfile", "--init-file"):
            out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
            out.problems.append(Problem(cmd.source, f"{base} {t} runs a startup file"))
            return out
        if t.startswith("--"):
            i += 1
            continue
        if len(t) > 1 and t[0] in "-+":
            flags = t[1:]
            command_mode = command_mode or "c" in flags
            read_stdin = read_stdin or "s" in flags
            i += 1 + sum(1 for f in flags if f in "oO")
            continue
        break
    rest = words[i:]
    if rest and not command_mode and not read_stdin and not rest[0].literal:
        out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
        why = f"{base} runs the script {rest[0].text}, only known at run time"
        out.problems.append(Problem(cmd.source, why))
        return out
    if command_mode:
        if not rest:
            out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
            if cmd.open_ended:  # xargs sh -c: the script arrives at run time
                out.problems.append(Problem(cmd.source, f"{base} -c runs a script from its input"))
            else:
                out.commands.append(cmd)
            return out
        out = script_of(cmd, rest[:1], nesting, base)
        expanded = _with_positionals(rest[0], rest[1:])
        if expanded is not None:  # decided as written and as it will run: the stricter wins
            again = script_of(cmd, [expanded], nesting, base, record=False)
            out.problems.extend(again.problems)
            out.commands.extend(again.commands)
        return out
    if rest and not read_stdin:
        return ParsedScript([cmd])  # `bash script.sh`: a script file, judged as a command
    kind, value = stdin if stdin else (None, None)
    if kind == "text" and value is not None:
        return script_of(cmd, [value], nesting, base)
    if kind == "file" and value is not None and not value.literal:
        out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
        out.problems.append(
            Problem(cmd.source, f"{base} runs {value.text}, only known at run time")
        )
        return out
    if kind == "pipe-text" and value is not None:
        out = script_of(cmd, [value], nesting, base)
        out.problems.append(Problem(cmd.source, f"{base} runs commands piped into it"))
        return out
    if kind == "pipe":
        out = ParsedScript([with_words(cmd, list(words), strict_only=True)])
        out.problems.append(
            Problem(cmd.source, f"{base} runs commands piped into it, which cannot be checked")
        )
        return out
    return ParsedScript([cmd])
