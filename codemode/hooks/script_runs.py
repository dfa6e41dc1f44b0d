"""Where the text of a hook's script starts a program or runs code, for ``script_scan``
(which decides what the names found there reach):

- a shell command line's program, or a file it sources or runs, named only by a
  variable or a command's output (``$CMD``, ``. "$(cat f)"``, ``bash -lc "$X"``,
  ``timeout 20 $FMT``), files another command lists (``xargs sh``, ``find -exec``), and
  a shell or interpreter given no script, which runs its input (``cat f | sh``, ``sh <
  f``, ``bash <<< "$X"``, ``. /dev/stdin``): ``unknown_programs``;
- the words a command line runs or sources (its first, the one after ``sh``,
  ``source``, ``exec``, ``timeout 20``, ``awk -f``...): ``run_words``;
- a call in code that starts a program (``os.system``, ``subprocess.run``,
  ``child_process.execSync``...), runs code or a module it is given (``exec``, ``eval``,
  ``runpy.run_path``, ``importlib.import_module``, ``require``, ``import()``,
  ``exec_module``, ``pickle.load``...) or puts a folder on Python's module path
  (``sys.path.insert``), with its argument as a command line where each part no literal
  spells is ``UNKNOWN``: ``calls``. ``os.system(open(".fmtcmd").read())`` runs what a
  file says, as ``$CMD`` does; ``subprocess.run(["git", "add", path])`` runs git. A
  name an import gives (``import subprocess as sp``, ``from os import system as sh``,
  ``const { execSync: sh } = require(...)``) counts as the module's or the call's, and
  such a call named but not called (``partial(subprocess.run)``) as one given a variable.

A text rule, not a parser: a call is its name, a ``(`` and what follows to the matching
``)``, in any language that spells calls so (a ``run(`` in a message counts too); a
name it cannot follow (``sh = run`` after ``from subprocess import run``) hides it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
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
# Words after which the next (options, ``VAR=value``, a duration skipped) is run or sourced.
RUNS_NEXT = frozenset(
    {
        *("source", ".", "eval", "exec", "-c", "xargs", "command", "env", "-exec", "-execdir"),
        *("timeout", "nice", "nohup", "time", "stdbuf", "setsid", "trap", "run-parts"),
        *("sh", "bash", "dash", "zsh", "ksh", "python", "python3", "node", "perl", "ruby"),
        *("run_path", "require", "import", "spawn", "execSync", "execFileSync", "system"),
        *("popen", "run", "call", "check_call", "check_output", "Popen"),
    }
)
_SEARCH_PATH = re.compile(r"(?:PATH|PYTHONPATH|NODE_PATH|PERL5LIB|RUBYLIB|LD_\w+)=(.*)")
_DURATION = re.compile(r"[\d.]+[smhd]?")  # (``timeout 20``, ``nice -n 10``)
_REDIRECT = re.compile(r"[\d&]*[<>]+&?")  # (``2>&1``, ``<f``; a ``<`` alone: the file next)
# Shells and interpreters that run their input given no script, and that input's names.
_READS_INPUT = (_INTERPRETERS - {"source"}) | {"node"}
_INPUT_FILES = re.compile(r"/dev/stdin|/dev/fd/\d+|/proc/self/fd/\d+")
_VARIABLE = "it runs what only a variable or a command's output names, which a command could write"
_LISTED = "it runs files another command lists (xargs, find -exec), which a command could write"
_INPUT = "it runs what a shell reads from a pipe, `<` or `<<<`, which a command could write"

# Calls, by name: what their argument is. "program": a command line or an argument list
# (its program first); "file": a file whose code runs; "code": code, a module or its name,
# pickled data; "path": a folder put on the module path. ("passed": named, not called)
_PROGRAM, _FILE, _CODE, _PATH, _PASSED, _CUT = "program", "file", "code", "path", "passed", "cut"
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
    **dict.fromkeys(["exec_module", "load_module", "unsafe_load", "unsafe_load_all"], _CODE),
    **dict.fromkeys(["load", "loads", "Unpickler"], _CODE),
    **dict.fromkeys(["insert", "append", "extend", "addsitedir"], _PATH),
}
# Names other code uses too (``asyncio.run``, ``re.compile``, ``regex.exec``): counted
# bare (``from subprocess import run``) or after one of these modules only.
_COMMON = frozenset(
    {"system", "popen", "run", "call", "spawn", "fork", "exec", "eval", "compile", "Function"}
)
_MODULES = frozenset(
    {"os", "subprocess", "child_process", "cp", "childProcess", "pty", "pexpect", "builtins"}
)
# Names counted only after one of these (``pickle.load``, never ``json.load``;
# ``sys.path.append``, never ``lines.append``), or imported from one by name.
_PICKLES = frozenset({"pickle", "cPickle", "_pickle", "dill"})
_ONLY_AFTER = {
    **dict.fromkeys(["load", "loads", "Unpickler"], _PICKLES),
    **dict.fromkeys(["insert", "append", "extend"], frozenset({"sys.path"})),
}
# Where a script names a module, and what it takes from it under which name: ``import
# subprocess as sp``, ``from os import system as sh``, ``const proc = require("cp")``,
# ``import * as cp from "cp"``, ``const { execSync: sh } = require(...)``.
_IMPORTS = (
    re.compile(r"(?m)^[ \t]*import[ \t]+(?P<names>[^\n#;]*)"),
    re.compile(r"\bfrom\s+(?P<module>[\w.]+)\s+import\s+(?P<names>\([^)]{0,999}\)|[\w., \t]+)"),
    re.compile(
        r"\b(?:import|const|let|var)\s+(?P<names>\{[^}]{0,999}\}|(?:\*\s*as\s+)?[\w$]+)\s*"
        r"(?:from|=\s*require\()\s*['\"](?:node:)?(?P<module>[\w/]+)['\"]"
    ),
)
# ``getattr(os, "system")``: ``os.system``.
_GETATTR = re.compile(r"\bgetattr\(\s*([\w$]+)\s*,\s*(['\"])(\w+)\2\s*\)")
# A module's call named but not called (``partial(subprocess.run, shell=True)``, ``sh =
# os.system``, ``promisify(cp.exec)``; not ``Popen``, a class annotations name too).
_NAMED = re.compile(r"(?<![\w$.])(?P<module>[\w$]+)\s*\.\s*(?P<name>(?!Popen\b)\w+)(?![\w$]|\s*\()")

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
    kind: str  # "program", "file", "code", "path", "passed"; "cut": more than were read
    command: str  # its argument as a command line, ``UNKNOWN`` for what no literal spells


def calls(text: str) -> list[Call]:
    """The calls of ``text`` (its whole-line ``#`` comments left out) that start a
    program, run code or put a folder on the module path, each with what it is given
    (the names imports give them followed); its calls named but not called; a last one
    of kind "cut" if there were more than could be read."""
    text = re.sub(r"(?m)^[ \t]*#.*$", "", text)
    text = _GETATTR.sub(r"\1.\3", text)
    modules, renamed = _aliases(text)
    found = [
        Call(f"{m['module']}.{m['name']}", _PASSED, UNKNOWN)
        for m in _NAMED.finditer(text)
        if m["name"] in _KINDS and modules.get(m["module"]) in _MODULES | _PICKLES
    ]
    budget = _READ_PER_CHAR * len(text) + _MAX_ARGUMENT
    names = "|".join(sorted(map(re.escape, {*_KINDS, *renamed}), key=len, reverse=True))
    for match in re.finditer(rf"(?<![\w$])(?P<name>{names})\(", text):
        if budget <= 0:
            found.append(Call("", _CUT, ""))
            break
        spelt, before = match.group("name"), text[max(0, match.start() - 64) : match.start()]
        name = renamed.get(spelt, spelt)
        if _DEFINES.search(before):
            continue
        qualified = _QUALIFIER.search(before)
        # (None: called bare; "": a method of what an expression made)
        module = None if qualified is None else qualified["module"] or qualified["required"] or ""
        allowed = _ONLY_AFTER.get(name)
        dotted = re.search(r"(?<![\w$.])([A-Za-z_$][\w$.]*)\.\s*$", before) if allowed else None
        if allowed and not (modules.get(dotted[1]) in allowed if dotted else spelt in renamed):
            continue
        if name in _COMMON and module is not None and modules.get(module) not in _MODULES:
            continue
        arguments, stop = _arguments(text, match.end())
        budget -= stop - match.end()
        if _KINDS[name] == _PATH and _own_folder(text[match.end() : stop]):
            continue
        # (os.spawnvp's mode, sys.path.insert's index: first)
        first = name == "insert" or (name.startswith("spawn") and modules.get(module or "") == "os")
        # (Function's arguments are its parameters' names and its body: each is code)
        picked = " ".join(arguments) if name == "Function" else (arguments[first:] or [""])[0]
        shown = dotted[1] if dotted else module  # (``sys.path.insert``, ``sp.run``)
        found.append(Call(f"{shown}.{spelt}" if shown else spelt, _KINDS[name], picked))
    return found


def _aliases(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The modules ``text`` names, each name it gives one with the module's (``sp``:
    ``subprocess``), and the calls its imports rename (``sh``: ``system``)."""
    modules = {m: m for m in (*_MODULES, *_PICKLES, "sys.path")}
    renamed: dict[str, str] = {}
    for pattern in _IMPORTS:
        for found in pattern.finditer(text):
            module = found.groupdict().get("module")
            for part in re.split(r"[,{}()\n]", found["names"]):
                words = [w for w in re.findall(r"[\w$.*]+", part) if w != "as"]
                if not words:
                    continue
                if module is None:  # (``import subprocess as sp``)
                    if len(words) == 2 and words[0] in modules:
                        modules[words[1]] = modules[words[0]]
                elif module not in modules and (words[0] in _COMMON or words[0] in _ONLY_AFTER):
                    continue  # (``from asyncio import run``, ``from json import load``)
                elif words[0] in _KINDS:
                    renamed[words[-1]] = words[0]
                elif module in modules:  # (``const proc = require(...)``)
                    modules[words[-1]] = module
    return modules, renamed


def _own_folder(argument: str) -> bool:
    """Whether a folder put on the module path is the script's own, not one above it."""
    ups = argument.count("dirname") + argument.count(".parent")
    return "__file__" in argument and ups <= 1 and not re.search(r"\.\.|parents", argument)


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


def unknown_programs(line: str, fed: bool = False) -> list[str]:
    """What ``line`` runs that no word of it names: a program, or a file sourced or run,
    that only a variable or a command's output names (``$CMD``, ``. "$(cat f)"``, ``sh
    -c "$X"``), files another command lists, and the input of a shell or interpreter
    given no script (``cat f | sh``, ``bash <<< "$X"``; ``fed``: ``line`` is what a call
    starts, whose input the script gives it)."""
    out = []
    for tokens, piped in _commands(line):
        for i, _ in _run_positions(tokens):
            if tokens[i] == UNKNOWN:
                out.append(_VARIABLE)
            elif _INPUT_FILES.fullmatch(tokens[i]) or (
                os.path.basename(tokens[i]) in _READS_INPUT
                and _runs_input(tokens[i + 1 :], fed or piped)
            ):
                out.append(_INPUT)
        for i, token in enumerate(tokens):
            before = tokens[i - 1] if i else ""
            # (`xargs sh`, `find . -exec sh {} ;`, `sh -c '{}'`; a `{}` alone: code's table)
            execs = before in ("-exec", "-execdir", "-ok", "-okdir") or "xargs" in tokens[:i]
            if (execs and (token in _INTERPRETERS or token == "{}")) or (
                before in RUNS_NEXT and token == "{}"
            ):
                out.append(_LISTED)
                break
    return list(dict.fromkeys(out))


def _runs_input(after: list[str], fed: bool) -> bool:
    """Whether a shell or interpreter given ``after`` (no script: options, redirects)
    runs an input given it (``fed``, ``<``, ``<<<``; a here-document is read as lines)."""
    target = arguments = False  # (the word after a redirect is its file or string)
    for word in after:
        if word.startswith("<<") and not word.startswith("<<<"):
            return False
        fed = fed or bool(re.match(r"\d*<", word))
        arguments = arguments or word in ("-s", "-")  # (the script's input, then its arguments)
        if not (target or arguments or word.startswith("-") or _REDIRECT.match(word)):
            return False
        target = bool(_REDIRECT.fullmatch(word))
    return fed


def _run_positions(tokens: list[str]) -> Iterator[tuple[int, str]]:
    """Where one command's ``tokens`` name what is run or sourced, each with the word
    before it: its first, and the first after a word of ``RUNS_NEXT`` (options,
    ``VAR=value`` and a duration skipped: ``bash -e x.sh``, ``env A=1 ./x``, ``timeout
    20 x``) or after ``awk -f``; ``command -v`` runs nothing, ``find .`` sources nothing."""
    file_flag = any(t.rsplit("/", 1)[-1] in FILE_FLAG_PROGRAMS for t in tokens)
    waiting, before, target = True, "", False
    for i, token in enumerate(tokens):
        lead = waiting and not before  # (the command's first word)
        skipped = target or token.startswith("-") or "=" in token or _REDIRECT.match(token)
        if waiting and before == "command" and token in ("-v", "-V"):
            waiting = False
        elif waiting and not (skipped or (before and _DURATION.fullmatch(token))):
            yield i, before
            waiting = False
        target = bool(_REDIRECT.fullmatch(token))
        if (token in RUNS_NEXT and (token != "." or lead)) or (file_flag and token in FILE_FLAGS):
            waiting, before = True, "source" if token in FILE_FLAGS else token


def run_words(line: str) -> list[tuple[str, str]]:
    """The words of ``line`` (a shell command line) that are run or sourced, each with
    the word before it (``_run_positions``), and the folders ``PATH=`` and its kind put
    first (``PATH="$CLAUDE_PROJECT_DIR/node_modules/.bin:$PATH"``), as sourced."""
    out = []
    for tokens, _ in _commands(line):
        out += [(tokens[i], before) for i, before in _run_positions(tokens)]
        found = (_SEARCH_PATH.fullmatch(t) for t in tokens)
        out += [(p, "source") for m in found if m for p in m[1].split(":") if p]
    return out


def _commands(line: str) -> list[tuple[list[str], bool]]:
    """The commands of ``line``, each its words and whether a pipe feeds it; what
    ``<(...)`` makes, a file no word names, is ``UNKNOWN``."""
    pieces = re.split(f"({_SEGMENTS.pattern})", line.replace("<(", f"{UNKNOWN}("))
    return [
        ([t.strip("'\"") for t in pieces[n].split()], n > 0 and pieces[n - 1] == "|")
        for n in range(0, len(pieces), 2)
    ]
