"""Where the text of a hook's script starts a program or runs code, for ``script_scan``
(which decides what the names found there reach):

- a shell command line's program, or a file it sources or runs, named only by a
  variable or a command's output (``$CMD``, ``. "$(cat f)"``, ``sh -c "$X"``), and
  files another command lists (``xargs sh``, ``find -exec``): ``unknown_programs``;
- the words a command line runs or sources (its first, the one after ``sh``,
  ``source``, ``exec``, ``awk -f``...): ``run_words``;
- a call in code that starts a program (``os.system``, ``subprocess.run``,
  ``child_process.execSync``...) or runs code or a module it is given (``exec``,
  ``eval``, ``runpy.run_path``, ``importlib.import_module``, ``require``,
  ``import()``...), with its argument as a command line where each part no literal
  spells is ``UNKNOWN``: ``calls``. ``os.system(open(".fmtcmd").read())`` runs what a
  file says, as ``$CMD`` does; ``subprocess.run(["git", "add", path])`` runs git.

A text rule, not a parser: a call is its name, a ``(`` and what follows to the matching
``)``, in any language that spells calls so (a ``run(`` in a message counts too), and
an alias it cannot see (``import subprocess as sp``) hides the call from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What stands for a part no reading of the text can know (a variable, a command's output).
UNKNOWN = "\x00"
# Programs whose ``-f FILE`` is their program (``awk -f fix.awk``: awk's ``system()``,
# GNU sed's ``e``; jq's filter decides what the hook prints, its answer).
FILE_FLAG_PROGRAMS = frozenset({"awk", "gawk", "mawk", "nawk", "sed", "gsed", "jq", "gojq", "yq"})
FILE_FLAGS = frozenset({"-f", "--file", "--from-file"})
# Interpreters that ``xargs`` or ``find -exec`` give the files another command lists.
_INTERPRETERS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "python", "python3", "perl", "ruby", "php", "source"}
)
# Words after which the next one is a file the script runs or reads as code.
RUNS_NEXT = frozenset(
    {
        *("source", ".", "eval", "exec", "-c", "xargs", "command", "env"),
        *("sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "perl", "ruby"),
        *("run_path", "require", "import", "spawn", "execSync", "execFileSync", "system"),
        *("popen", "run", "call", "check_call", "check_output", "Popen"),
    }
)

# Calls, by name: what their argument is. "program": a command line or an argument list
# (its program first); "file": a file whose code runs; "code": code, or a module's name.
_PROGRAM, _FILE, _CODE, _CUT = "program", "file", "code", "cut"
_OS_EXEC = [
    f"{p}{s}" for p in ("exec", "spawn") for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
]
_KINDS: dict[str, str] = {
    **dict.fromkeys(["system", "popen", "Popen", "run", "call", "check_call"], _PROGRAM),
    **dict.fromkeys(["check_output", "getoutput", "getstatusoutput", "spawn"], _PROGRAM),
    **dict.fromkeys(["create_subprocess_exec", "create_subprocess_shell"], _PROGRAM),
    **dict.fromkeys(["posix_spawn", "posix_spawnp", *_OS_EXEC], _PROGRAM),
    **dict.fromkeys(["execSync", "execFile", "execFileSync", "spawnSync"], _PROGRAM),
    **dict.fromkeys(["run_path", "fork"], _FILE),
    **dict.fromkeys(["exec", "eval", "compile", "Function", "import_module"], _CODE),
    **dict.fromkeys(["__import__", "run_module", "require", "import"], _CODE),
    **dict.fromkeys(["runInThisContext", "runInNewContext", "runInContext"], _CODE),
}
# Names other code uses too (``asyncio.run``, ``re.compile``, ``regex.exec``): counted
# bare (``from subprocess import run``) or after one of these modules only.
_COMMON = frozenset(
    {"system", "popen", "run", "call", "spawn", "fork", "exec", "eval", "compile", "Function"}
)
_MODULES = frozenset(
    {"os", "subprocess", "child_process", "cp", "childProcess", "pty", "pexpect", "builtins"}
)
_CALL = re.compile(
    r"(?<![\w$])(?P<name>"
    + "|".join(sorted(map(re.escape, _KINDS), key=len, reverse=True))
    + r")\("
)
# What a call's name follows: ``os.``, ``require("child_process").``, ``x().``.
_QUALIFIER = re.compile(
    r"(?:(?P<module>[A-Za-z_$][\w$]*)"
    r"|require\(\s*(?P<q>['\"])(?:node:)?(?P<required>\w+)(?P=q)\s*\)"
    r"|[)\]}'\"`])\s*\.\s*$"
)
# A call's definition, not a call (``def run(cmd):``, ``function exec(x) {``).
_DEFINES = re.compile(r"(?:\bdef|\bfunction|\bfn)\s+$")
# Names that stand for a program in code (``[sys.executable, "-c", ...]``).
ALIASES = {"sys.executable": "python", "process.execPath": "node"}
# How far an argument is read: a call's argument longer than this is not known. And how
# much is read in all, per character of the text: unclosed brackets or quotes would
# have each call read to the bound (a minified bundle in a hook's folder).
_MAX_ARGUMENT = 4000
_READ_PER_CHAR = 4
_QUOTES = "'\"`"
# Where a shell line's commands part: each segment's first word is a program.
_SEGMENTS = re.compile(r"[;&|()]|(?<![\w./-])(?:then|do|else|if|while|until)(?![\w./-])")


@dataclass(frozen=True)
class Call:
    name: str  # as the script spells it: ``subprocess.run``
    kind: str  # "program", "file", "code"; "cut": more calls than were read
    command: str  # its argument as a command line, ``UNKNOWN`` for what no literal spells


def calls(text: str) -> list[Call]:
    """The calls of ``text`` (its whole-line ``#`` comments left out) that start a
    program or run code, each with what it is given; a last one of kind "cut" if there
    were more than could be read."""
    text = re.sub(r"(?m)^[ \t]*#.*$", "", text)
    found = []
    budget = _READ_PER_CHAR * len(text) + _MAX_ARGUMENT
    for match in _CALL.finditer(text):
        if budget <= 0:
            found.append(Call("", _CUT, ""))
            break
        name, before = match.group("name"), text[max(0, match.start() - 64) : match.start()]
        if _DEFINES.search(before):
            continue
        qualified = _QUALIFIER.search(before)
        # (None: called bare; "": a method of what an expression made)
        module = None if qualified is None else qualified["module"] or qualified["required"] or ""
        if name in _COMMON and module is not None and module not in _MODULES:
            continue
        arguments, stop = _arguments(text, match.end())
        budget -= stop - match.end()
        if name.startswith("spawn") and module == "os":
            arguments = arguments[1:]  # (its mode first: os.spawnvp(os.P_WAIT, ...))
        # (Function's arguments are its parameters' names and its body: each is code)
        picked = " ".join(arguments) if name == "Function" else (arguments or [""])[0]
        found.append(Call(f"{module}.{name}" if module else name, _KINDS[name], picked))
    return found


def _arguments(text: str, start: int) -> tuple[list[str], int]:
    """The arguments of the call whose ``(`` ends at ``start``, each as a command line
    (a literal string's text, a list's items joined by spaces, ``"git " + f`` as
    ``git UNKNOWN``; a keyword's name, ``args=``, and comments dropped), and where
    reading them stopped."""
    out: list[str] = []
    part: list[str] = []
    depth, i, end = 0, start, min(len(text), start + _MAX_ARGUMENT)
    after_name = False  # (a ``(`` or ``[`` after a name is a call or a subscript)
    skip_to = -1  # (inside a call's or subscript's brackets: part of what is unknown)
    while i < end:
        c = text[i]
        if c in _QUOTES or (c.isalpha() and (prefix := _string_prefix(text, i))):
            quote = i if c in _QUOTES else i + len(prefix)
            literal, i = _string(text, quote, "" if c in _QUOTES else prefix, end)
            if skip_to < 0:
                part.append(literal)
            after_name = False
            continue
        if c == "#" or text.startswith("//", i):
            newline = text.find("\n", i, end)  # (a comment, to the line's end)
            i = end if newline < 0 else newline
            continue
        if c in "([{":
            if after_name and skip_to < 0:
                skip_to = depth
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                break
            if depth == skip_to:
                skip_to, after_name = -1, True  # (``f(x).read()``, ``d["k"]["j"]``)
                i += 1
                continue
        elif skip_to >= 0:
            pass
        elif c == "," and depth == 0:
            out.append("".join(part))
            part = []
        elif c == "," or c.isspace():
            part.append(" ")
        elif c.isalnum() or c in "_$.":
            word = re.match(r"[\w$.]+", text[i:end])
            assert word is not None
            keyword = re.match(r"\s*=(?!=)", text[word.end() + i : end])
            if depth == 0 and keyword and not "".join(part).strip():
                i += word.end() + keyword.end()  # (``args=``: its value follows)
                continue
            part.append(ALIASES.get(word.group(), UNKNOWN))
            after_name, i = True, i + word.end()
            continue
        elif c != "+":
            part.append(UNKNOWN)  # (``*args``, an operator: what it makes is not known)
        after_name = False
        i += 1
    if i >= end and end < len(text):
        part.append(f" {UNKNOWN}")  # (cut at the bound: what follows is not known)
    out.append("".join(part))
    # (``open(f).read()`` is one thing not known, not two)
    return [re.sub(f"{UNKNOWN}+", UNKNOWN, a).strip() for a in out if a.strip()], i


def _string_prefix(text: str, i: int) -> str:
    """The prefix of the string literal the word at ``i`` starts (``f"..."``, ``rb'...'``),
    or ""."""
    word = re.match(r"[rRbBuUfF]{1,2}(?=['\"])", text[i : i + 3])
    if word is None or (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
        return ""
    return word.group()


def _string(text: str, i: int, prefix: str, end: int) -> tuple[str, int]:
    """The literal whose quote is at ``i`` (its interpolations, an f-string's ``{x}`` or
    a template's ``${x}``, as ``UNKNOWN``) and where it ends (``end`` at most)."""
    quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else text[i]
    opens = "${" if quote == "`" else "{" if "f" in prefix.lower() else None
    out: list[str] = []
    i += len(quote)
    while i < end and not text.startswith(quote, i):
        c = text[i]
        if c == "\\" and i + 1 < end:
            out.append(" " if text[i + 1] in "nt" else text[i + 1])
            i += 2
        elif opens == "{" and text[i : i + 2] in ("{{", "}}"):
            out.append(c)  # (an f-string's escaped brace)
            i += 2
        elif opens and text.startswith(opens, i):
            close = text.find("}", i, end)
            out.append(UNKNOWN)
            i = end if close < 0 else close + 1
        elif len(quote) == 1 and quote != "`" and c == "\n":
            break  # (an unclosed quote: the line's end)
        else:
            out.append(c)
            i += 1
    return "".join(out), i + len(quote)


def unknown_programs(line: str) -> list[str]:
    """A program, or a file sourced or run, that only a variable or a command's output
    names (``$CMD``, ``. "$(cat f)"``, ``sh -c "$X"``)."""
    out = []
    for segment in _SEGMENTS.split(line):
        tokens = [t.strip("'\"") for t in segment.split()]
        while tokens and "=" in tokens[0] and not tokens[0].startswith(UNKNOWN):
            tokens.pop(0)  # (VAR=value before the command)
        for i, token in enumerate(tokens):
            before = tokens[i - 1] if i else ""
            lead = i == 0 or before in RUNS_NEXT
            if token == UNKNOWN and lead:
                out.append(
                    "it runs a program or file that a variable or a command's "
                    "output names, which could lie where a command writes"
                )
                break
            # (`xargs sh`, `find . -exec sh {} ;`, `-exec {} ;`, `sh -c '{}'`: the files
            # another command lists, which a command could have written; a `{}` alone is
            # code's empty table)
            execs = before in ("-exec", "-execdir", "-ok", "-okdir") or "xargs" in tokens[:i]
            if (execs and (token in _INTERPRETERS or token == "{}")) or (
                i > 0 and lead and token == "{}"
            ):
                out.append(
                    "it runs files that another command lists (xargs, find -exec), "
                    "which a command could have written"
                )
                break
    return out


def run_words(line: str) -> list[tuple[str, str]]:
    """The words of ``line`` (a shell command line) that are run or sourced, each with
    the word before it: each command's first, and the first after a word of
    ``RUNS_NEXT`` (its options and ``VAR=value`` skipped: ``bash -e x.sh``, ``env A=1
    ./x``) or after ``awk -f``."""
    out = []
    for segment in _SEGMENTS.split(line):
        tokens = [t.strip("'\"") for t in segment.split()]
        file_flag = any(t.rsplit("/", 1)[-1] in FILE_FLAG_PROGRAMS for t in tokens)
        waiting, before = True, ""
        for token in tokens:
            if waiting and not (token.startswith("-") or "=" in token):
                out.append((token, before))
                waiting = False
            if token in RUNS_NEXT or (file_flag and token in FILE_FLAGS):
                waiting, before = True, "source" if token in FILE_FLAGS else token
    return out
