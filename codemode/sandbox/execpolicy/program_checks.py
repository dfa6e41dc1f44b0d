"""Program-specific checks the safe-command table names with ``check = "..."``: what a
table of options cannot say (a sed script, an awk program, a find expression, a variable
name that bash evaluates).

Each check receives the generic reading of the arguments (``Finding``) and adds to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from codemode.sandbox.execpolicy import secret_paths
from codemode.sandbox.execpolicy.findings import Finding, strings_in
from codemode.sandbox.execpolicy.sed_script import analyze
from codemode.sandbox.execpolicy.variables import is_identifier, risky_variable
from codemode.sandbox.execpolicy.words import Word


def _sed(f: Finding, args: Sequence[Word], label: str) -> None:
    scripts = [v for k in ("-e", "--expression") for v in f.values.get(k, [])]
    files = list(f.plain)
    if not scripts:
        if not f.plain:
            return
        scripts, files = [f.plain[0]], f.plain[1:]
    if "-i" in f.values or "--in-place" in f.values:
        f.outputs += [(w, f"{label} -i rewrites {w.text}") for w in files]
        if not files:
            f.raise_to("prompt", f"{label} -i without a file")
    sandboxed = "--sandbox" in f.values  # GNU sed then refuses e, w and r
    for s in scripts:
        if s is None:
            continue
        if not s.literal:
            f.raise_to("prompt", f"{label} runs a script only known at run time ({s.text})")
            continue
        result = analyze(s.text)
        for name in [] if sandboxed else result.reads:  # relative: cwd may be /proc/N
            hit = secret_paths.path_kind(Word(name), (), True)
            if hit is not None and hit.kind == "sensitive":
                f.raise_to("prompt", f"{label} r {name}: reads {hit.why}")
        if result.safe or sandboxed:
            continue
        if result.runs:
            f.raise_to("prompt", f"{label}: {result.reason}")
        f.payloads += [(c, f"{label} runs it (e command or s///e)") for c in result.commands]
        f.outputs += [(Word(p), f"{label} writes {p} (w command)") for p in result.writes]


# system(), pipes, getline, extensions, gawk's indirect calls (@f()), redirections
_AWK_RISKY = re.compile(r"\bsystem\b|\||\bgetline\b|@|\bprintf?\b[^;}]*>")


# Options that load or run program files (-W is mawk's and gawk's way to spell any of
# them: -W source=..., -W exec=...), and those that write a file (a profile, a dump of
# the variables, a pretty-printed program).
_AWK_LOADS = frozenset({"-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec", "-W"})
_AWK_WRITES = frozenset({"-p", "--profile", "-o", "--pretty-print", "-d", "--dump-variables"})


_AWK_ARGV = re.compile(r"\bARG[VC]\b")
_AWK_LONG = (*_AWK_LOADS, *_AWK_WRITES, "--source", "--assign", "--field-separator")


def _awk_long(option: str) -> str:
    """The gawk long option ``option`` abbreviates (the riskiest when ambiguous)."""
    if not option.startswith("--") or len(option) < 3 or option in _AWK_LONG:
        return option
    return next((o for o in _AWK_LONG if o.startswith(option)), option)


def _awk(f: Finding, args: Sequence[Word], label: str) -> None:
    i = 0
    programs: list[Word] = []  # every -e/--source text is part of the program
    while i < len(args):
        w = args[i]
        t = w.text if w.literal else ""
        if not w.literal:
            break
        if t == "--":
            i += 1
            break
        option, eq, attached = t.partition("=")
        option = _awk_long(option)  # gawk takes any unambiguous prefix: --fi=PROG
        if option in _AWK_LOADS or (t[:2] in _AWK_LOADS and len(t) > 2 and t[1] != "-"):
            f.raise_to("prompt", f"{label} {t} runs or loads a program file")
            return
        if option in _AWK_WRITES or (t[:2] in _AWK_WRITES and t[1] != "-"):
            f.raise_to("prompt", f"{label} {t} writes a file")
            return
        if option in ("-e", "--source"):
            if eq:
                programs.append(Word(attached))
                i += 1
            else:
                programs += args[i + 1 : i + 2]
                i += 2
            continue
        if t.startswith("-e") and len(t) > 2:  # -e'PROGRAM'
            programs.append(Word(t[2:]))
            i += 1
            continue
        if t in ("-F", "-v", "--assign", "--field-separator"):
            i += 2
            continue
        if t.startswith("-") and t != "-":
            i += 1
            continue
        break
    program: Word | None = None
    if programs:
        dynamic = next((p for p in programs if not p.literal), None)
        program = dynamic or Word("\n".join(p.text for p in programs))
    if program is None and i < len(args):
        program = args[i]
    if program is None:
        return
    if not program.literal:
        f.raise_to("prompt", f"{label} runs a program only known at run time")
        return
    if "--sandbox" in (w.text for w in args if w.literal):
        return
    if _AWK_ARGV.search(program.text):
        # ARGV[1]="/proc/1/environ": the program picks the files it reads itself
        f.raise_to("prompt", f"{label}: the program changes the files it reads (ARGV)")
    if _AWK_RISKY.search(program.text):
        f.raise_to("prompt", f"{label}: the program runs commands or writes files")
        for s in strings_in(program.text):
            if s.strip():
                f.payloads.append((s, f"a string in the {label} program"))
                f.outputs.append((Word(s), f"the {label} program may write {s}"))


_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fls", "-fprint", "-fprint0", "-fprintf"})


def _find(f: Finding, args: Sequence[Word], label: str) -> None:
    for i, w in enumerate(args):
        if not w.literal:
            if w.kind == "dynamic" or w.text[:1] in "*?[-":
                f.raise_to("unmatched", f"find: {w.text} is only known at run time")
            continue
        if w.text in _FIND_RUNS:
            f.raise_to("prompt", f"find {w.text} runs a command for every file")
        elif w.text == "-delete":
            f.raise_to("prompt", "find -delete deletes files")
        elif w.text in _FIND_WRITES:
            target = args[i + 1] if i + 1 < len(args) else Word("")
            f.outputs.append((target, f"find {w.text} writes {target.text}"))


def _subscript_payload(f: Finding, name: Word, label: str) -> None:
    """A variable name bash assigns: risky names, and ``a[SUBSCRIPT]`` (evaluated)."""
    if not name.literal:
        f.raise_to("prompt", f"{label} assigns a variable only known at run time")
        return
    base, bracket, rest = name.text.partition("[")
    if bracket:
        f.raise_to("prompt", f"{label}: the subscript of {name.text} is evaluated as code")
        f.payloads.append((rest.rsplit("]", 1)[0], f"the subscript in {label}"))
    if not is_identifier(base):
        f.raise_to("prompt", f"{label}: {name.text} is not a plain variable name")
    elif risky_variable(base):
        f.raise_to("prompt", f"{label} sets {base}, which changes what runs")


def _test(f: Finding, args: Sequence[Word], label: str) -> None:
    for i, w in enumerate(args[:-1]):
        if w.literal and w.text == "-v":
            target = args[i + 1]
            if not target.literal or "[" in target.text:
                _subscript_payload(f, target, f"{label} -v")


def _printf(f: Finding, args: Sequence[Word], label: str) -> None:
    for value in f.values.get("-v", []):
        if value is not None:
            _subscript_payload(f, value, "printf -v")


_READ_VALUE = frozenset({"-d", "-i", "-n", "-N", "-p", "-t", "-u"})


def _read(f: Finding, args: Sequence[Word], label: str) -> None:
    i = 0
    names: list[Word] = []
    while i < len(args):
        w = args[i]
        if w.literal and w.text in _READ_VALUE:
            i += 2
            continue
        if w.literal and w.text == "-a":
            if i + 1 < len(args):
                names.append(args[i + 1])
            i += 2
            continue
        if w.literal and w.text.startswith("-") and len(w.text) > 1:
            i += 1
            continue
        names.append(w)
        i += 1
    for n in names:
        _subscript_payload(f, n, "read")


def _fd(f: Finding, args: Sequence[Word], label: str) -> None:
    for i, w in enumerate(args):
        if w.literal and w.text in ("-x", "--exec", "-X", "--exec-batch"):
            rest = [a for a in args[i + 1 :]]
            if any(not a.literal for a in rest):
                f.raise_to("prompt", "fd runs a command only known at run time")
            else:
                words = [a.text for a in rest if a.text not in (";", "{}")]
                f.payloads.append((" ".join(words), f"fd {w.text} runs it for every file"))
            return


def _git_config(f: Finding, args: Sequence[Word], label: str) -> None:
    """``git config KEY VALUE``: the value may be a program git runs later (core.pager,
    core.fsmonitor, diff.external, alias.x=!CMD...)."""
    if f.level != "prompt" or len(f.plain) < 2:
        return
    value = f.plain[1]
    if value.literal:
        f.payloads.append((value.text.lstrip("!"), f"{label} {f.plain[0].text} may run it"))


# ps options that take a value (UNIX style -p 1, BSD style p 1), and the long ones.
_PS_VALUE = "CGgpqstuUoO"
_PS_BSD_VALUE = "pqtUoOk"
_PS_LONG_VALUE = frozenset(
    "--pid --ppid --sort --cols --columns --width --rows --lines --user --User --group "
    "--Group --tty --sid --quick-pid --format".split()
)
_PS_ENV = "shows the environment of every process (secrets such as API keys)"


def _ps(f: Finding, args: Sequence[Word], label: str) -> None:
    """``ps e`` (BSD), ``ps -E`` (BSD, macOS) and a format naming ``environ``/``env``
    print other processes' environments."""
    i = 0

    def value(rest: str) -> Word | None:
        nonlocal i
        if rest:
            return Word(rest)
        if i < len(args):
            i += 1
            return args[i - 1]
        return None

    def fmt(w: Word | None) -> None:
        if w is not None and not w.literal:
            f.raise_to("unmatched", f"{label}: the format {w.text} is only known at run time")
        elif w is not None and "env" in w.text.lower():
            f.raise_to("prompt", f"{label} {w.text} {_PS_ENV}")

    while i < len(args):
        w = args[i]
        i += 1
        t = w.text
        if not w.literal or t in ("-", "--"):
            continue  # the generic reading already said `unmatched`
        if t.startswith("--"):
            name, eq, attached = t.partition("=")
            if name in _PS_LONG_VALUE:
                got = Word(attached) if eq else value("")
                if name == "--format":
                    fmt(got)
            continue
        bsd = not t.startswith("-")
        if bsd and all(c.isdigit() or c == "," for c in t):
            continue  # process ids
        letters = t if bsd else t[1:]
        for j, c in enumerate(letters):
            if (bsd and c == "e") or (not bsd and c == "E"):
                f.raise_to("prompt", f"{label} {t} {_PS_ENV}")
            if c in (_PS_BSD_VALUE if bsd else _PS_VALUE):
                got = value(letters[j + 1 :])
                if c in "oO":
                    fmt(got)
                break


# yq's functions that read a file: load, load_str, load_xml, load_props, load_base64...
_YQ_LOAD = re.compile(r"\bload\w*\s*\(")
_YQ_LOAD_LITERAL = re.compile(r"\bload\w*\s*\(\s*\"([^\"\\]*)\"\s*\)")


def _yq(f: Finding, args: Sequence[Word], label: str) -> None:
    """``yq 'load("/proc/1/environ")'`` reads any file: a secret, or one only known at
    run time (``load(.path)``), needs approval."""
    for w in args:
        calls = len(_YQ_LOAD.findall(w.text))
        if not calls:
            continue
        paths = _YQ_LOAD_LITERAL.findall(w.text)
        if not w.literal or len(paths) < calls:
            f.raise_to("prompt", f"{label} loads a file only known at run time")
        for path in paths:
            hit = secret_paths.path_kind(Word(path), (), True)
            if hit is not None and hit.kind == "sensitive":
                f.raise_to("prompt", f"{label} loads {path}: {hit.why}")


CHECKS: dict[str, Callable[[Finding, Sequence[Word], str], None]] = {
    "sed": _sed,
    "awk": _awk,
    "find": _find,
    "test": _test,
    "printf": _printf,
    "read": _read,
    "fd": _fd,
    "git_config": _git_config,
    "ps": _ps,
    "yq": _yq,
}
