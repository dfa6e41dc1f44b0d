"""Whether a command is known to be safe: the program table of ``safe_commands.toml``.

``check(name, args)`` reads a command's arguments the way the program does (flags,
clusters such as ``-iz``, options with values attached or in the next word, ``--``) and
reports a ``Finding``: ``allow`` when every word is known harmless, ``prompt`` when some
option writes, runs or loads something, ``unmatched`` when a word only known at run time
could be anything, ``unknown`` when the program is not in the table. Commands a program
would run (``--pre=CMD``, ``sed 'e CMD'``) and files it would write come back too, for
the policy to decide.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

# Re-exported: what a check reports lives in a leaf module the program checks share.
from codemode.sandbox.execpolicy import program_checks
from codemode.sandbox.execpolicy.findings import Finding as Finding
from codemode.sandbox.execpolicy.findings import Level as Level
from codemode.sandbox.execpolicy.findings import strings_in as strings_in
from codemode.sandbox.execpolicy.words import Word

Role = Literal["ok", "prompt", "output", "payload"]


@dataclass(frozen=True)
class Option:
    arity: int  # 0: a flag; 1: takes a value; 2: an optional value, attached only
    role: Role


@dataclass(frozen=True)
class Spec:
    """What one program (or git subcommand) accepts."""

    options: dict[str, Option]
    any_option: bool = False
    positionals: str | int = "any"
    output_positionals: int | None = None
    shapes: tuple[str, ...] = ()
    check: str | None = None
    positionals_with: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    subcommands: dict[str, Spec] = field(default_factory=dict)
    bare: bool = False

    @property
    def plain(self) -> bool:
        """Any word at all is harmless (so words only known at run time are too)."""
        return (
            self.any_option
            and all(o.role == "ok" for o in self.options.values())
            and self.check is None
            and self.output_positionals is None
            and not self.shapes
            and self.positionals == "any"
        )


def _option_table(entries: Sequence[str], role: Role) -> dict[str, Option]:
    out = {}
    for e in entries:
        if e.endswith("=?"):
            out[e[:-2]] = Option(2, role)
        elif e.endswith(":"):
            out[e[:-1]] = Option(1, role)
        else:
            out[e] = Option(0, role)
    return out


def _spec(data: dict[str, Any]) -> Spec:
    options: dict[str, Option] = {}
    roles: tuple[tuple[str, Role], ...] = (
        ("options", "ok"),
        ("prompt", "prompt"),
        ("output", "output"),
    )
    for key, role in roles:
        options.update(_option_table(data.get(key, []), role))
    options.update(_option_table(data.get("payload", []), "payload"))
    return Spec(
        options=options,
        any_option=bool(data.get("any_option")),
        positionals=data.get("positionals", "any"),
        output_positionals=data.get("output_positionals"),
        shapes=tuple(data.get("shapes", ())),
        check=data.get("check"),
        positionals_with=tuple(data.get("positionals_with", ())),
        requires=tuple(data.get("requires", ())),
        subcommands={k: _spec(v) for k, v in data.get("subcommands", {}).items()},
        bare=bool(data.get("bare")),
    )


@functools.cache
def _data() -> dict[str, Any]:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("safe_commands.toml")
    text = resource.read_text("utf-8")
    return tomllib.loads(text)


@functools.cache
def programs() -> dict[str, Spec]:
    return {name: _spec(d) for name, d in _data()["programs"].items()}


@functools.cache
def git_subcommands() -> dict[str, Spec]:
    return {name: _spec(d) for name, d in _data()["git"].items()}


def git_runs() -> dict[str, list[str]]:
    runs: dict[str, list[str]] = _data()["git_runs"]
    return runs


def interpreters() -> dict[str, list[str]]:
    found: dict[str, list[str]] = _data()["interpreters"]
    return found


@functools.cache
def always_prompt() -> frozenset[str]:
    return frozenset(_data()["always_prompt"]["programs"])


def _could_be_option(w: Word) -> bool:
    """A word only known at run time, or a glob that may expand to ``-something``."""
    if w.kind == "dynamic":
        return True
    if w.kind == "glob":
        return not w.text or w.text[0] in "*?[-"
    return False


def read_args(spec: Spec, args: Sequence[Word], label: str) -> Finding:
    """Read ``args`` against ``spec``: the generic check every table entry gets."""
    f = Finding()
    i = 0
    after_dashes = False
    present: set[str] = set()

    def handle(name: str, opt: Option, value: Word | None) -> None:
        present.add(name)
        f.values.setdefault(name, []).append(value)
        if opt.role == "prompt":
            f.raise_to("prompt", f"{label} {name} writes, runs or loads something")
        elif opt.role == "output":
            if value is None:
                f.raise_to("prompt", f"{label} {name} writes a file")
            else:
                f.outputs.append((value, f"{label} {name} writes {value.text}"))
        elif opt.role == "payload":
            if value is None:
                f.raise_to("prompt", f"{label} {name} runs a program")
            elif not value.literal:
                f.raise_to("prompt", f"{label} {name} runs a program only known at run time")
            else:
                f.payloads.append((value.text, f"{label} {name} runs it"))

    while i < len(args):
        w = args[i]
        i += 1
        if after_dashes:
            f.plain.append(w)
            continue
        if _could_be_option(w):
            if spec.plain:
                f.plain.append(w)
                continue
            f.raise_to("unmatched", f"{w.text} is only known at run time and could be an option")
            f.plain.append(w)
            continue
        t = w.text
        if t == "--":
            after_dashes = True
            continue
        if not t.startswith("-") or t == "-" or w.kind != "literal":
            f.plain.append(w)
            continue
        name, eq, attached = t.partition("=")
        if t.startswith("--") and name not in spec.options:
            name = _abbreviated(spec, name)
        if t.startswith("--") or name in spec.options:
            opt = spec.options.get(name)
            if opt is None:
                if not spec.any_option:
                    f.raise_to("prompt", f"{label} {name} is not an option known to be harmless")
                continue
            value: Word | None = None
            if opt.arity == 1:
                if eq:
                    value = Word(attached)
                elif i < len(args):
                    value, i = args[i], i + 1
            elif opt.arity == 2 and eq:
                value = Word(attached)
            handle(name, opt, value)
            continue
        j = 1
        while j < len(t):
            name = "-" + t[j]
            opt = spec.options.get(name)
            if opt is None:
                if not spec.any_option:
                    f.raise_to("prompt", f"{label} {name} is not an option known to be harmless")
                j += 1
                continue
            if opt.arity:
                rest = t[j + 1 :]
                value = Word(rest) if rest else None
                if value is None and opt.arity == 1 and i < len(args):
                    value, i = args[i], i + 1
                handle(name, opt, value)
                break
            handle(name, opt, None)
            j += 1
    _positionals(spec, f, present, label)
    return f


_ROLE_RANK = {"ok": 0, "prompt": 1, "output": 2, "payload": 3}


def _abbreviated(spec: Spec, name: str) -> str:
    """The long option ``name`` stands for: getopt_long (and git's parse-options) take
    any unambiguous prefix, ``--sp`` for ``--split-string``. Of several candidates the
    riskiest (ambiguous prefixes fail there, so this only ever asks more)."""
    found = [o for o in spec.options if o.startswith(name) and o.startswith("--")]
    if len(name) < 3 or not found:
        return name
    return max(found, key=lambda o: (_ROLE_RANK[spec.options[o].role], o))


def _positionals(spec: Spec, f: Finding, present: set[str], label: str) -> None:
    plain = f.plain
    if spec.requires and not present & set(spec.requires):
        f.raise_to("prompt", f"{label} without {' or '.join(spec.requires)} changes something")
    if plain and spec.positionals_with:
        if present & set(spec.positionals_with):
            return
        f.raise_to("prompt", f"{label} {plain[0].text} changes something")
    if spec.positionals == "none" and plain:
        f.raise_to("prompt", f"{label} with an argument ({plain[0].text}) changes something")
    elif isinstance(spec.positionals, int) and len(plain) > spec.positionals:
        f.raise_to("prompt", f"{label} takes at most {spec.positionals} file arguments here")
    if spec.output_positionals is not None:
        for w in plain[spec.output_positionals - 1 :]:
            f.outputs.append((w, f"{label} writes its output to {w.text}"))
    for w in plain:
        if not spec.shapes:
            break
        if not w.literal:
            f.raise_to("unmatched", f"{label}: {w.text} is only known at run time")
        elif not any(fnmatch.fnmatchcase(w.text, s) for s in spec.shapes):
            f.raise_to("prompt", f"{label} {w.text} changes something")


def check_spec(spec: Spec, args: Sequence[Word], label: str) -> Finding:
    if spec.subcommands:
        first = args[0] if args else None
        if first is not None and first.literal and first.text in spec.subcommands:
            return check_spec(spec.subcommands[first.text], args[1:], f"{label} {first.text}")
        if not spec.bare:
            return Finding("unknown")
    f = read_args(spec, args, label)
    if spec.check:
        program_checks.CHECKS[spec.check](f, args, label)
    return f


def _versions(name: str, args: Sequence[Word]) -> bool:
    v = _data()["versions"]
    if name not in v["programs"] or len(args) != 1 or not args[0].literal:
        return False
    return args[0].text in v["words"] or args[0].text in v["extra"].get(name, [])


def _inline_code(name: str, args: Sequence[Word]) -> Finding | None:
    options = interpreters().get(name)
    if options is None:
        return None
    for i, w in enumerate(args):
        if not w.literal:
            continue
        hit = next(
            (o for o in options if w.text == o or fnmatch.fnmatchcase(w.text, o)), None
        ) or next((o for o in options if len(o) == 2 and w.text.startswith(o)), None)
        if hit is None:
            continue
        f = Finding("prompt", f"{name} {hit} runs inline code that cannot be checked")
        code = w.text[len(hit) :] if w.text != hit and len(hit) == 2 else None
        if code is None and i + 1 < len(args):
            code = args[i + 1].text if args[i + 1].literal else None
        for s in strings_in(code or ""):
            if s.strip():
                f.payloads.append((s, f"a string in {name}'s inline code"))
        return f
    return None


def check(name: str, args: Sequence[Word], *, open_ended: bool = False) -> Finding:
    """The finding for the program ``name`` (a bare name) run with ``args``;
    ``open_ended``: more arguments are added at run time (xargs, find -exec)."""
    f = _check(name, args)
    if open_ended and f.level == "allow":
        spec = programs().get(name)
        if spec is None or not spec.plain:
            f.raise_to("unmatched", f"{name} gets more arguments at run time")
    return f


@functools.cache
def _runs_options() -> dict[str, Spec]:
    return {
        name: Spec(options=_option_table(opts, "payload"), any_option=True)
        for name, opts in _data()["runs_options"].items()
    }


def _command_options(name: str, args: Sequence[Word]) -> Finding | None:
    """Programs with an option (or a +CMD / SHELL=CMD word) naming a command they run."""
    spec = _runs_options().get(name)
    if spec is None:
        return None
    f = read_args(spec, args, name)
    for w in args:
        if not w.literal:
            continue
        if name in ("less", "more", "most") and w.text.startswith("+"):
            f.payloads.append((w.text.lstrip("+").lstrip("!"), f"{name} {w.text[:1]}CMD runs it"))
        elif name == "make" and w.text.split("=", 1)[0] in ("SHELL", "MAKESHELL", ".SHELLFLAGS"):
            f.payloads.append((w.text.split("=", 1)[1], f"make {w.text.split('=')[0]}= runs it"))
    f.payloads = [
        (t[5:] if t.startswith("exec=") else t, why) for t, why in f.payloads if t.strip()
    ]
    if not f.payloads and f.level != "prompt":
        return None
    f.raise_to("prompt", f"{name} runs a command named in its arguments")
    return f


def _check(name: str, args: Sequence[Word]) -> Finding:
    if _versions(name, args):
        return Finding()
    if name in always_prompt():
        return Finding("prompt", f"{name} runs commands or code that cannot be checked")
    inline = _inline_code(name, args) or _command_options(name, args)
    if inline is not None:
        return inline
    if name == "git":
        first = args[0] if args else None
        if first is None or not first.literal or first.text not in git_subcommands():
            return Finding("unknown")
        sub = git_subcommands()[first.text]
        return check_spec(sub, args[1:], f"git {first.text}")
    spec = programs().get(name)
    if spec is None:
        return Finding("unknown")
    return check_spec(spec, args, name)
