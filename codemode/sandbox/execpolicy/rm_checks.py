"""Built-in checks of ``rm`` that depend on the workspace: deleting outside the writable
roots asks, ``rm -r`` of ``/``, a top-level directory or the home directory is forbidden.
Also the candidate working directories a relative path may be relative to.
"""

from __future__ import annotations

import fnmatch
import os
import os.path
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.execpolicy.script_types import SimpleCommand, with_words
from codemode.sandbox.execpolicy.verdicts import CommandFacts, CommandVerdict, PolicyContext
from codemode.sandbox.execpolicy.words import Word
from codemode.sandbox.execpolicy.wrapper_table import long_option, wrapper_table

BUILTIN = "built-in"


def candidate_cwds(
    commands: Sequence[SimpleCommand], ctx: PolicyContext
) -> tuple[list[Path], bool]:
    """Every directory a relative path might be relative to, following ``cd``s."""
    cwds = [ctx.cwd]
    unknown = False
    for cmd in commands:
        if cmd.strict_only and cmd.words and cmd.words[0].literal:
            moved = _wrapper_dirs(cmd.words)
            if moved is None:
                unknown = True
            else:
                cwds += [Path(os.path.normpath(c / d)) for d in moved for c in cwds]
            continue
        if cmd.strict_only or not cmd.words or cmd.words[0].text not in ("cd", "pushd"):
            continue
        args = [w for w in cmd.words[1:] if not (w.literal and w.text.startswith("-"))]
        if not args:
            cwds.append(ctx.home)
        elif not args[0].literal:
            unknown = True
        else:
            cwds += [Path(os.path.normpath(c / args[0].text)) for c in cwds]
    return list(dict.fromkeys(cwds)), unknown


def _wrapper_dirs(words: Sequence[Word]) -> list[str] | None:
    """The directories a wrapper runs its command in (``env -C DIR``, ``sudo -D DIR``);
    None when a path may mean anything there (a new root, a directory only known at run
    time)."""
    spec = wrapper_table().get(os.path.basename(words[0].text))
    if not isinstance(spec, dict):
        return []
    chdir = set(spec.get("chdir_options", ()))
    root = set(spec.get("root_options", ()))
    if not chdir and not root and not spec.get("root_positional"):
        return []
    values = set(spec.get("value_options", ())) | chdir | root
    out: list[str] = []
    i = 1
    while i < len(words):
        w = words[i]
        i += 1
        if not w.literal or not w.text.startswith("-") or w.text in ("-", "--"):
            if spec.get("root_positional"):
                return None  # chroot NEWROOT
            break
        name, eq, attached = w.text.partition("=")
        if name.startswith("--"):
            name = long_option(name, spec)  # env --chd=/
        if not eq and not name.startswith("--") and len(name) > 2 and name[:2] in values:
            name, attached, eq = name[:2], name[2:], "="  # -C/dir
        if name not in values:
            continue
        if eq:
            value: Word | None = Word(attached)
        else:
            value = words[i] if i < len(words) else None
            i += 1
        if name in root:
            return None
        if name in chdir:
            if value is None or not value.literal:
                return None
            out.append(value.text)
    return out


def _rm_parts(cmd: SimpleCommand) -> tuple[bool, list[Word]] | None:
    if not cmd.words or not cmd.words[0].literal:
        return None
    if os.path.basename(cmd.words[0].text) != "rm":
        return None
    recursive = False
    targets: list[Word] = []
    options_done = False
    for w in cmd.words[1:]:
        if not options_done and w.literal and w.text == "--":
            options_done = True
        elif not options_done and w.literal and w.text.startswith("-") and w.text != "-":
            recursive = (
                recursive
                or w.text == "--recursive"
                or (not w.text.startswith("--") and any(c in "rR" for c in w.text[1:]))
            )
        else:
            targets.append(w)
    return recursive, targets


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def inside_roots(word: Word, ctx: PolicyContext) -> bool:
    """Whether ``word`` names a path inside the writable roots (links resolved)."""
    static = _static_path(word) if word.kind != "glob" else None
    if static is None or not static:
        return False
    p = Path(os.path.normpath(ctx.cwd / static))
    roots = [Path(os.path.realpath(r)) for r in ctx.writable_roots] + list(ctx.writable_roots)
    return _inside(p, roots) and _inside(Path(os.path.realpath(p)), roots)


def _static_path(word: Word) -> str | None:
    """For a literal word its text; for a glob the directory its matches lie in."""
    if word.kind == "literal":
        return word.text
    if word.kind == "glob":
        head = word.text
        for i, c in enumerate(head):
            if c in "*?[":
                head = head[:i]
                break
        return os.path.dirname(head) if "/" in head else "."
    return None


def rm_check(f: CommandFacts) -> list[CommandVerdict]:
    """``rm`` of a path outside the writable roots, or one only known at run time."""
    found = _rm_outside(f.cmd, f.ctx, f.cwds, f.cwd_unknown, f.shown, f.words)
    return [found] if found is not None else []


def rm_root_check(f: CommandFacts) -> list[CommandVerdict]:
    """``rm -r`` of ``/``, a top-level system directory or the home directory."""
    found = _rm_root(f.cmd, f.ctx, f.cwds, f.shown, f.words)
    return [found] if found is not None else []


def rm_root_by_glob(f: CommandFacts) -> list[CommandVerdict]:
    """``/bin/r? -rf /``: a command name that is a glob matching ``rm``, judged as rm."""
    name = f.cmd.words[0] if f.cmd.words else None
    if name is None or name.kind != "glob":
        return []
    if not fnmatch.fnmatchcase("rm", os.path.basename(name.text)):
        return []
    as_rm = with_words(f.cmd, [Word("rm"), *f.cmd.words[1:]])
    found = _rm_root(as_rm, f.ctx, f.cwds, f.shown, f.words)
    return [found] if found is not None else []


def _rm_outside(
    cmd: SimpleCommand,
    ctx: PolicyContext,
    cwds: list[Path],
    cwd_unknown: bool,
    shown: str,
    words: tuple[str, ...],
) -> CommandVerdict | None:
    parts = _rm_parts(cmd)
    if parts is None:
        return None
    _, targets = parts
    rule = f"{BUILTIN}: rm outside the writable roots"
    why = "deletes files outside the workspace"
    if cmd.open_ended:
        return CommandVerdict(
            shown,
            "prompt",
            rule,
            None,
            "deletes paths only known at run time (xargs, find -exec)",
            words,
        )
    roots = [Path(os.path.realpath(r)) for r in ctx.writable_roots] + list(ctx.writable_roots)
    for t in targets:
        static = _static_path(t)
        if static is None:
            return CommandVerdict(
                shown,
                "prompt",
                rule,
                None,
                f"deletes {t.text}, a path only known at run time",
                words,
            )
        relative = not os.path.isabs(static)
        if relative and cwd_unknown:
            return CommandVerdict(
                shown,
                "prompt",
                rule,
                None,
                "deletes a relative path after a cd to a directory only known at run time",
                words,
            )
        for base in cwds if relative else [Path("/")]:
            p = Path(os.path.normpath(base / static))
            real = Path(os.path.realpath(p))
            if not (_inside(p, roots) and _inside(real, roots)):
                return CommandVerdict(shown, "prompt", rule, None, f"{why}: {p}", words)
    return None


def _rm_root(
    cmd: SimpleCommand,
    ctx: PolicyContext,
    cwds: list[Path],
    shown: str,
    words: tuple[str, ...],
) -> CommandVerdict | None:
    parts = _rm_parts(cmd)
    if parts is None or not parts[0]:
        return None
    for t in parts[1]:
        static = _static_path(t)
        if static is None:
            continue
        bases = cwds if not os.path.isabs(static) else [Path("/")]
        for base in bases:
            p = Path(os.path.normpath(base / static))
            if _inside(p, ctx.writable_roots) and p not in (Path("/"), ctx.home):
                continue
            whole = t.kind == "glob" and p in (Path("/"), ctx.home)
            if p == Path("/") or p == ctx.home or p.parent == Path("/") or whole:
                return CommandVerdict(
                    shown,
                    "forbidden",
                    f"{BUILTIN}: rm -r of /, a top-level directory or the home directory",
                    None,
                    f"would delete {p} and everything under it; do this yourself if you mean it",
                    words,
                )
    return None
