"""What the scripts a trusted hook runs start in turn: a hook's trust covers its script
and the script's folder, not what the script runs from elsewhere.

``sh .codemode/hooks/fmt.sh`` whose script runs ``npx prettier --write .``, ``make
lint``, ``python3 -m tool``, ``. ./scripts/env.sh``, ``python3 tools/y.py`` or
``os.system(open(".fmtcmd").read())`` runs code from the workspace that the trust did
not cover, and that a confined command could have written. Such a hook runs in the
session's sandbox, as one naming the tool itself does (``project_runners``), and its
"allow" does not count. Which hooks: those whose covered files (each file its command
names in the workspace, every file of each folder kept with them) say, anywhere in
their text, in any language:

- a program of ``project_runners.toml`` as a word (``make``, ``env make``, ``m\\ake``,
  ``m''ake``, ``M=make``, ``["npx", ...]``, ``./node_modules/.bin/x``), or a Python that
  puts its working folder on its module path (``-m``, ``-c``, a script from stdin);
- a word of ``[script_words]`` (``node_modules``, ``PYTHONPATH``, ``eval``...);
- a path outside the covered folders where a command could write: in the workspace
  (``./x``, ``tools/y.py``, ``$CLAUDE_PROJECT_DIR/scripts/lib.sh``,
  ``"$(dirname "$0")/../lib.sh"``, a file name with a script's suffix, any word after
  ``source`` or ``.``) or in a writable root;
- a program or a sourced file named only by a variable or a command's output
  (``$CMD``, ``. "$(cat f)"``, ``bash -lc "$X"``) or read from a shell's input (``cat f
  | sh``), and a call in code that starts a program, runs code or puts a folder on the
  module path, whose argument is not a literal (``os.system(cmd)``, ``sp.run(f.read())``,
  ``exec(...)``, ``importlib.import_module(name)``, ``sys.path.insert(0, ".")``,
  ``child_process.execSync(...)``, ``require(name)``: ``script_runs``): what it names
  is not known.

The user's own scripts elsewhere (a ``~/.claude/hooks/fmt.sh`` the hook names), which
no command wrote, are read for what they *run*, not what they mention: a program of the
table (``npx prettier`` runs the workspace's ``node_modules`` as the hook ``npx
prettier`` would), a Python reading its working folder (the workspace: ``python3 -c``
imports its ``json.py``), a path in the workspace or a writable root that it runs or
sources (a command's first word, the word after ``sh``, ``source``, ``exec``..., a
``PATH=`` folder), a program or call named only by a variable as above. Reading a
workspace file, or passing its path to a program, does not count there; nor do the
words of ``[script_words]``.

This reads text, not programs: a word in a message or an inline comment counts too
(whole-line ``#`` comments do not), and a script built to hide a name from it (``"ma" +
"ke"``, ``sub = subprocess``) would pass. The person trusting the hook reads the
script, and its author is not who this guards against: the scan finds the ways scripts
ordinarily reach the workspace, and errs toward running them confined, which costs a
hook little. What is read is what was trusted: each file's bytes are hashed as they are
read and must match the trusted digest (a folder's, its manifest), else the answer is
not kept and the hook runs confined (it is refused anyway, having changed).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from codemode.hooks import project_runners, script_folders
from codemode.hooks.script_runs import (
    ALIASES,
    FILE_FLAG_PROGRAMS,
    FILE_FLAGS,
    calls,
    run_words,
    unknown_programs,
)
from codemode.hooks.script_runs import UNKNOWN as _UNKNOWN

# Suffixes of files a script runs or loads: a bare file name with one is a file of the
# working folder (the workspace), wherever it is mentioned.
_CODE_SUFFIXES = (
    ".sh",
    ".bash",
    ".zsh",
    ".py",
    ".js",
    ".mjs",
    ".cjs",
    ".ts",
    ".rb",
    ".pl",
    ".php",
    ".lua",
    ".mk",
    ".env",
    ".envrc",
    ".awk",
    ".sed",
    ".jq",
)
# Words after which a bare word naming a file of the working folder is run or read as
# code (``sh configure``, ``php artisan``, ``perl Makefile.PL``).
_FILE_NEXT = frozenset(
    {
        "source",
        ".",
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "python",
        "python3",
        "perl",
        "ruby",
        "php",
        "lua",
        "Rscript",
        "pwsh",
        "tclsh",
        "run-parts",
    }
)
# A word that could be a program's name (looked up on PATH for its ``#!`` or a proxy).
_PROGRAM_NAME = re.compile(r"[A-Za-z][\w.+-]{0,63}")
# Bytes looked at to tell a program (a NUL among them) from a script.
_BINARY_PROBE = 8192
_SPLIT = re.compile(r"[\s'\"`;|&<>(){}\[\],=:!*?\\]+")
_SUBST = (
    re.compile(r"\$\([^()]*\)"),  # $(...), innermost first
    re.compile(r"`[^`]*`"),
    re.compile(r"\$\{[^{}]*\}"),  # ${VAR:-x}, ${BASH_SOURCE%/*} (a known ${VAR}: before)
    re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@*#?$!-]"),
    re.compile(r"\{[A-Za-z_][\w.]*\}"),  # a Python f-string's {name}
)
_KNOWN = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass
class Scan:
    reasons: list[str] = field(default_factory=list)
    exact: bool = True  # what was read is what was trusted: the answer may be kept


def scan(
    command_files: list[str], trusted: Mapping[str, str], cwd: Path, env: Mapping[str, str]
) -> Scan:
    """Why a hook trusted with ``trusted`` (its files' and folders' digests) runs
    confined, one line each (empty: nothing found); ``command_files``: every file its
    command names (those outside ``trusted`` are read as they are: no command could
    have written them)."""
    out = Scan()
    covered = [Path(p) for p, d in trusted.items() if script_folders.is_folder(d)]
    texts: dict[str, bytes] = {}
    for path, want in trusted.items():
        if script_folders.is_folder(want):
            kept: dict[str, bytes] = {}
            try:
                now = script_folders.manifest(Path(path), kept)
            except script_folders.NotKept:
                now = ""
            if now != want:
                out.exact = False
                out.reasons.append(f"{path} is not as it was trusted")
            texts.update({os.path.join(path, rel): data for rel, data in kept.items()})
        else:
            data = _read(path)
            if data is None or hashlib.sha256(data).hexdigest() != want:
                out.exact = False
                if want:  # ("": never trusted, said by ``trust`` already)
                    out.reasons.append(f"{path} is not as it was trusted")
            texts[path] = data or b""
    for path in command_files:
        real = os.path.realpath(path)
        if real not in texts and path not in texts:
            data = _read(real)
            if data is not None:
                texts[real] = data
    top = cwd.resolve()
    for path, data in texts.items():
        if b"\0" in data[:_BINARY_PROBE]:
            if path in trusted or any(Path(path).is_relative_to(c) for c in covered):
                out.reasons.append(
                    f"{path}: a program whose text cannot be read, so what it starts is not known"
                )
            continue  # (a program itself, as `/bin/sh` of `sh -c`: the user's, not read)
        # (the user's own scripts elsewhere: for what they run, not what they mention;
        # no command wrote them, but one may have written what they run)
        full = path in trusted or any(Path(path).is_relative_to(c) for c in covered)
        text = data.decode("utf-8", "replace").replace(_UNKNOWN, " ")
        said = _findings(text, Path(path), covered, top, env, full)
        out.reasons += [f"{path}: {why}" for why in said]
    out.reasons = list(dict.fromkeys(out.reasons))
    return out


def _read(path: str) -> bytes | None:
    """A regular file's bytes, at most ``script_folders.MAX_BYTES`` (None: not one, or
    more: not covered either way)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(script_folders.MAX_BYTES + 1)
    return data if len(data) <= script_folders.MAX_BYTES else None


def _findings(
    text: str,
    where: Path,
    covered: list[Path],
    top: Path,
    env: Mapping[str, str],
    full: bool = True,
) -> list[str]:
    """Why ``text`` runs what its trust does not cover; ``full``: a file the trust
    covers, where a word or a path that is only mentioned counts too."""
    table = project_runners.table()
    runners: dict[str, str] = table["runners"]
    pythons: list[str] = table["module_flag"]["programs"]
    words: dict[str, str] = table["script_words"]
    out: list[str] = []
    for n, line in enumerate(text.splitlines()):
        shebang = n == 0 and line.startswith("#!")
        if line.lstrip().startswith("#") and not shebang:
            continue  # (a whole-line comment runs nothing, in any of these languages)
        for variant in {line, line.replace("\\", ""), re.sub(r"[\\'\"]", "", line)}:
            plain = _substitute(variant, env)
            tokens = [t for t in _SPLIT.split(plain) if t]
            file_flag = any(os.path.basename(t) in FILE_FLAG_PROGRAMS for t in tokens)
            for i, token in enumerate(tokens):
                name = ALIASES.get(token, os.path.basename(token.rstrip("/")))
                if name in runners:
                    out.append(f"`{name}` runs code from {runners[name]}")
                elif _PROGRAM_NAME.fullmatch(token) and (
                    note := project_runners.program_note(token, top, env)
                ):
                    out.append(note)
                if (
                    re.sub(r"[\d.]+$", "", name) in pythons
                    and not shebang
                    and project_runners.reads_cwd(tokens[i + 1 :])
                ):
                    out.append(
                        f"`{name}` (with `-m`, `-c` or a script from stdin) runs "
                        f"code from {table['module_flag']['loads']}"
                    )
                if not full:
                    continue
                for part in {token, *token.split("/")}:
                    if part in words:
                        out.append(f"`{part}`: {words[part]}, which the script uses")
                before = tokens[i - 1] if i else ""
                if file_flag and before in FILE_FLAGS:
                    before = "source"  # (awk -f FILE: FILE is its program)
                why = _path(token, before, where, covered, top)
                if why is not None:
                    out.append(why)
            out += _runs(plain, where, covered, top, full)
    return out + _call_findings(text, where, covered, top, env)


def _call_findings(
    text: str, where: Path, covered: list[Path], top: Path, env: Mapping[str, str]
) -> list[str]:
    """Why the calls of ``text`` that start a program or run code (``script_runs``) run
    what its trust does not cover: their program, file or code is not a literal, or is
    a path where a command could write."""
    out: list[str] = []
    for call in calls(text):
        if call.kind == "cut":
            out.append("it has more calls than are read, so what the rest start is not known")
            break
        said = f"`{call.name}(…)`"
        command = _substitute(call.command, env)
        if call.kind == "passed":
            out.append(
                f"`{call.name}` is passed on or renamed, not called by its name, so what "
                "it starts is not known"
            )
            continue
        if call.kind == "path":  # (a relative folder is the working folder's: the workspace)
            folder = _under(top, os.path.expanduser(command))
            own = any(folder.is_relative_to(c) for c in covered)
            if _UNKNOWN in command or (not own and _reachable(folder, top)):
                out.append(
                    f"{said} puts a folder on the module path that a command could "
                    "write in (the workspace, or one it is given as it runs)"
                )
            continue
        if call.kind == "code":
            if _UNKNOWN in command:
                out.append(
                    f"{said} runs code, or a module, that it is given as the script "
                    "runs (no literal), which could come from a file a command wrote"
                )
            continue
        if call.kind == "file":
            command = f"source {command}"  # (a file whose code runs)
        fed = call.kind == "program"  # (the script gives it its input)
        out += [f"{said}: {why}" for why in _runs(command, where, covered, top, False, fed)]
    return out


def _runs(
    line: str, where: Path, covered: list[Path], top: Path, full: bool, fed: bool = False
) -> list[str]:
    """Why the command line ``line`` runs what its trust does not cover: a program or
    file a variable names, a shell's input (``fed``: a call's, which the script gives),
    and (unless ``full`` looked at every path) a path it runs."""
    out = unknown_programs(line, fed)
    if not full:
        for word, before in run_words(line):
            why = _path(word, before, where, covered, top)
            if why is not None:
                out.append(why)
    return out


def _substitute(line: str, env: Mapping[str, str]) -> str:
    """``line`` with the variables the hook's environment holds expanded (its
    ``$CLAUDE_PROJECT_DIR``, ``$HOME``) and every other ``$VAR``, ``$(...)``, backquote
    and ``{name}`` as ``_UNKNOWN``."""
    line = _KNOWN.sub(
        lambda m: (
            env.get(m.group(1), m.group(0))
            if (m.group(0).startswith("${") == m.group(0).endswith("}"))
            else m.group(0)
        ),
        line,
    )
    for _ in range(8):  # (nested $(...): innermost first, a few levels)
        before = line
        for pattern in _SUBST:
            line = pattern.sub(_UNKNOWN, line)
        if line == before:
            break
    return line


def _path(token: str, before: str, where: Path, covered: list[Path], top: Path) -> str | None:
    """Why ``token`` names a place outside the covered folders where a command could
    write (its own folder first, for ``"$(dirname "$0")"/x``), or None."""
    if "://" in token or token.startswith("//") or token in ("/", ".", "..", "-"):
        return None
    candidates: list[Path] = []
    if _UNKNOWN in token:
        head, _, _ = token.partition(_UNKNOWN)
        rest = token.rsplit(_UNKNOWN, 1)[1]
        if head:  # (`scripts/$name.sh`: some file below `scripts/`)
            candidates.append(_under(top, head.rsplit("/", 1)[0] if "/" in head else "."))
        elif rest.startswith("/") and len(rest) > 1:
            beside = _under(where.parent, rest.lstrip("/"))
            # (`"$(dirname "$0")"/lib.sh`: a file of its own covered folder, which is
            # what such a name is written for; else it may be the workspace's)
            # (the user's own script's folder, which no command reaches, is theirs too)
            own = any(beside.is_relative_to(c) for c in covered) or not _reachable(beside, top)
            if not (os.path.isfile(beside) and own):
                candidates += [beside, _under(top, rest.lstrip("/"))]
    elif "/" in token or token.startswith("~"):
        path = Path(os.path.expanduser(token))
        full = path if path.is_absolute() else _under(top, token)
        if (
            path.is_absolute()
            or token.startswith(("./", "../", "~"))
            or token.lower().endswith(_CODE_SUFFIXES)
            or os.path.lexists(full)
            or os.path.lexists(top / token.split("/", 1)[0])
        ):
            candidates.append(full)
    elif (
        token.lower().endswith(_CODE_SUFFIXES)
        or before in ("source", ".")
        or (before in _FILE_NEXT and os.path.lexists(_under(top, token)))
    ):
        candidates.append(_under(top, token))
    for path in candidates:
        for spelt in dict.fromkeys((path, Path(os.path.realpath(path)))):
            if any(spelt == c or spelt.is_relative_to(c) for c in covered):
                continue
            if _reachable(spelt, top):
                return (
                    f"`{token.replace(_UNKNOWN, '$…')}` names {spelt}, outside the "
                    "folders its trust covers, where a command could write"
                )
    return None


def _under(folder: Path, rel: str) -> Path:
    return Path(os.path.normpath(folder / rel))


def _reachable(path: Path, top: Path) -> bool:
    """Whether a command could write at ``path``: in the workspace or a writable root."""
    return path == top or path.is_relative_to(top) or _writable(path)


def _writable(path: Path) -> bool:
    from codemode.locations.host_programs import writable_root_of

    return writable_root_of(str(path)) is not None
