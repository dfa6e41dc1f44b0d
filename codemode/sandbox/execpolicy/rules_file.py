"""Reading and writing ``.rules`` files (the format is ``rules``' docstring).

The file is parsed with Python's ``ast`` and only literal strings, numbers, booleans and
lists are accepted, so nothing in it is evaluated. A failing ``match`` / ``not_match``
example is a load error naming the file and line. "Always" answers are appended as one
line each (``append_allow_rule``, ``append_exact_rule``).
"""

from __future__ import annotations

import ast
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codemode.locations import small_files
from codemode.sandbox.execpolicy.rules import (
    DECISIONS,
    ExactRule,
    Layer,
    PrefixRule,
    RuleSet,
    starlark,
)
from codemode.sandbox.execpolicy.words import Word


class RulesError(ValueError):
    """A rules file that cannot be loaded; the message names the file and line."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line = path, line


def parse_rules(text: str, path: str, layer: Layer = "user") -> RuleSet:
    """Parse the text of a rules file; raises RulesError naming ``path`` and the line."""
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise RulesError(path, exc.lineno or 1, f"syntax error: {exc.msg}") from None
    out = RuleSet()
    for stmt in tree.body:
        line = stmt.lineno
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            raise RulesError(path, line, "expected a call such as prefix_rule(...)")
        if call.args:
            raise RulesError(path, line, f"{call.func.id}() takes named arguments only")
        kwargs: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                raise RulesError(path, line, "**arguments are not supported")
            if kw.arg in kwargs:
                raise RulesError(path, kw.value.lineno, f"argument {kw.arg!r} given twice")
            kwargs[kw.arg] = _literal(kw.value, path)
        if call.func.id == "prefix_rule":
            out.rules.append(_prefix_rule(kwargs, path, line, layer))
        elif call.func.id == "allow_command":
            command = kwargs.get("command")
            if set(kwargs) - {"command", "justification"} or not isinstance(command, str):
                raise RulesError(path, line, "allow_command() needs command= a command line")
            if not command.strip():
                raise RulesError(path, line, "allow_command() needs a non-empty command")
            out.exact.append(ExactRule(command.strip(), f"{path}:{line}", layer))
        elif call.func.id == "host_executable":
            name, paths = _host_executable(kwargs, path, line)
            out.executables[name] = out.executables.get(name, ()) + paths
        else:
            raise RulesError(
                path,
                line,
                f"unknown function {call.func.id}(); expected prefix_rule, allow_command "
                "or host_executable",
            )
    return out


def _literal(node: ast.expr, path: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bool | int):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, path) for e in node.elts]
    raise RulesError(
        path, node.lineno, "only literal strings, numbers, booleans and lists are allowed"
    )


_PREFIX_KEYS = {
    "pattern",
    "decision",
    "justification",
    "match",
    "not_match",
    "any_argument",
    "no_argument",
}


def _prefix_rule(kw: dict[str, Any], path: str, line: int, layer: Layer) -> PrefixRule:
    unknown = sorted(set(kw) - _PREFIX_KEYS)
    if unknown:
        raise RulesError(path, line, f"prefix_rule() got unknown argument {unknown[0]!r}")
    raw = kw.get("pattern")
    if not isinstance(raw, list) or not raw:
        raise RulesError(path, line, "prefix_rule() needs pattern=[...] with at least one token")
    pattern: list[tuple[str, ...]] = []
    for token in raw:
        alts = token if isinstance(token, list) else [token]
        if not alts or not all(isinstance(a, str) and a for a in alts):
            raise RulesError(
                path,
                line,
                f"pattern token {token!r} must be a non-empty string or a non-empty list of them",
            )
        pattern.append(tuple(alts))
    decision = kw.get("decision", "allow")
    if decision not in DECISIONS:
        raise RulesError(
            path, line, f"decision must be one of allow, prompt, forbidden; got {decision!r}"
        )
    justification = kw.get("justification")
    if justification is not None and not isinstance(justification, str):
        raise RulesError(path, line, "justification must be a string")
    globs = {}
    for key in ("any_argument", "no_argument"):
        value = kw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(g, str) for g in value):
            raise RulesError(path, line, f"{key} must be a list of strings")
        globs[key] = tuple(value)
    rule = PrefixRule(
        pattern=tuple(pattern),
        decision=decision,
        justification=justification,
        source=f"{path}:{line}",
        layer=layer,
        **globs,
    )
    for key, want in (("match", "yes"), ("not_match", "no")):
        examples = kw.get(key, [])
        if not isinstance(examples, list):
            raise RulesError(path, line, f"{key} must be a list of examples")
        for example in examples:
            tokens = _example_tokens(example, path, line, key)
            got = rule.match([Word(t) for t in tokens])
            if got != want:
                verb = "does not match" if want == "yes" else "matches"
                raise RulesError(
                    path, line, f"{key} example {shlex.join(tokens)!r} {verb} this rule"
                )
    return rule


def _example_tokens(example: object, path: str, line: int, key: str) -> list[str]:
    if isinstance(example, str):
        try:
            return shlex.split(example)
        except ValueError as exc:
            raise RulesError(path, line, f"{key} example {example!r}: {exc}") from None
    if isinstance(example, list) and all(isinstance(t, str) for t in example):
        return example
    raise RulesError(path, line, f"{key} examples must be strings or lists of strings")


def _host_executable(kw: dict[str, Any], path: str, line: int) -> tuple[str, tuple[str, ...]]:
    name, paths = kw.get("name"), kw.get("paths")
    if set(kw) - {"name", "paths"}:
        raise RulesError(path, line, "host_executable() takes name= and paths= only")
    if not isinstance(name, str) or not name or "/" in name:
        raise RulesError(path, line, "host_executable() needs name= a bare program name")
    if not isinstance(paths, list) or not all(
        isinstance(p, str) and p.startswith("/") for p in paths
    ):
        raise RulesError(path, line, "host_executable() needs paths= a list of absolute paths")
    return name, tuple(paths)


def load_rules_file(path: Path, layer: Layer = "user") -> RuleSet:
    """Load one ``.rules`` file."""
    try:
        # (a rule per approval "always": years of them stay far below this)
        text = small_files.read_text(path, cap=8 << 20)
    except OSError as exc:
        raise RulesError(str(path), 0, f"cannot read rules file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise RulesError(str(path), 0, "rules file is not UTF-8 text") from None
    out = parse_rules(text, str(path), layer)
    out.files.append(path)
    return out


def load_rules_dir(directory: Path, layer: Layer) -> RuleSet:
    """All ``*.rules`` files of ``directory``, in name order (none if it is missing)."""
    out = RuleSet()
    try:
        if not directory.is_dir():
            return out
        paths = sorted(directory.glob("*.rules"))
    except OSError as exc:  # e.g. a folder this user may not read
        raise RulesError(
            str(directory), 0, f"cannot read rules folder: {exc.strerror or exc}"
        ) from None
    for path in paths:
        out.extend(load_rules_file(path, layer))
    return out


def append_allow_rule(path: Path, pattern: Sequence[str], justification: str | None = None) -> None:
    """Append ``prefix_rule(pattern=..., decision="allow")`` to the rules file ``path``."""
    line = f'prefix_rule(pattern={starlark(list(pattern))}, decision="allow"'
    if justification:
        line += f", justification={starlark(justification)}"
    line += ")\n"
    _append_line(path, line)


def append_exact_rule(path: Path, command: str) -> None:
    """Append ``allow_command(command=...)`` (this exact command line) to ``path``."""
    _append_line(path, f"allow_command(command={starlark(command.strip())})\n")


def _append_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = ""
    if path.exists() and path.stat().st_size:
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            prefix = "" if f.read(1) == b"\n" else "\n"
    with path.open("a", encoding="utf-8") as f:
        f.write(prefix + line)
