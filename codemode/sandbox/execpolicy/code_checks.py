"""Places where bash evaluates data as code, found in the syntax tree.

- Assignments (``VAR=x cmd``, ``VAR=x``, ``export``/``declare``/``local``/``readonly``/
  ``typeset``, ``for VAR in``): a variable that changes what runs (``PATH``,
  ``LD_PRELOAD``, ``BASH_ENV``... see ``variables.toml``) needs approval.
- A value holding code (``x='a[$(CMD)]'``, ``declare -a "a=([\\$(CMD)]=1)"``): bash may
  evaluate it later (arithmetic, subscripts, ``eval``), so the code is parsed and decided
  as a command, and the whole line needs approval at least.
- Arithmetic (``$((...))``, ``((...))``, ``for ((...))``, subscripts, ``${x:OFFSET}``,
  ``[[ a -eq b ]]``) evaluates the values of the variables it names, recursively, and a
  ``a[$(CMD)]`` in such a value runs CMD: arithmetic that names a variable assigned from
  run-time data in the same script (``read``, ``$(...)``, ``for x in``) needs approval,
  as does arithmetic over a command's output.
- ``unset 'a[$(CMD)]'`` and ``[[ -v 'a[$(CMD)]' ]]`` (``[ -v ...]`` too) evaluate their
  subscript, and so does ``[[ 'a[$(CMD)]' -eq 0 ]]`` with a literal operand; ``[`` and
  ``test`` read ``-eq`` operands as plain integers, evaluating nothing.
- ``${x@P}`` expands the value of x as a prompt string, running its ``$(...)``;
  ``${!x}`` with x assigned from run-time data may name ``a[$(CMD)]``.
- Functions that call themselves or each other (``:(){ :|:& };:``, the fork bomb) run
  without end: they need approval.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from codemode.sandbox.execpolicy.script_types import Problem, SimpleCommand, Stdin
from codemode.sandbox.execpolicy.variables import is_identifier, risky_variable
from codemode.sandbox.execpolicy.words import Word

if TYPE_CHECKING:
    from tree_sitter import Node


class ScriptWalker(Protocol):
    """What the checks read from (and add to) the parser's walk (``shell_parse``)."""

    found: list[tuple[SimpleCommand, Stdin | None]]
    literals: dict[str, set[str]]
    payloads: list[tuple[str, str]]  # (script, why): decided as commands

    def text(self, node: Node) -> str: ...

    def word(self, node: Node) -> Word: ...


NODE_TYPES = frozenset(
    {
        "variable_assignment",
        "declaration_command",
        "unset_command",
        "for_statement",
        "arithmetic_expansion",
        "compound_statement",
        "c_style_for_statement",
        "subscript",
        "test_command",
        "expansion",
        "function_definition",
    }
)
_ARITH_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_READERS = frozenset({"read", "mapfile", "readarray", "getopts"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})


def _problem(source: str, reason: str) -> Problem:
    return Problem(source, reason)


def holds_code(value: str) -> bool:
    """A literal value that bash would run code from if it evaluated it."""
    return "$(" in value or "`" in value or ("[" in value and "$" in value)


def _descendants(node: Node) -> Iterable[Node]:
    stack = list(node.children)
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _names(walker: ScriptWalker, nodes: Iterable[Node]) -> set[str]:
    out = set()
    for n in nodes:
        for d in [n, *_descendants(n)]:
            if d.type == "variable_name" or (d.type == "word" and is_identifier(walker.text(d))):
                out.add(walker.text(d))
    return out


def _has_substitution(nodes: Iterable[Node]) -> bool:
    return any(d.type in _SUBSTITUTIONS for n in nodes for d in [n, *_descendants(n)])


def _tainted(walker: ScriptWalker, nodes: list[Node]) -> set[str]:
    """Variables this script assigns from run-time data."""
    out: set[str] = set()
    for cmd, _ in walker.found:
        if not cmd.words or not cmd.words[0].literal:
            continue
        name = os.path.basename(cmd.words[0].text)
        args = cmd.words[1:]
        if name in _READERS:
            out.update(w.text for w in args if w.literal and is_identifier(w.text))
        elif name == "printf":
            for i, w in enumerate(args[:-1]):
                if w.literal and w.text == "-v":
                    out.add(args[i + 1].text.partition("[")[0])
    for n in nodes:
        if n.type == "variable_assignment":
            target = n.child_by_field_name("name")
            value = n.child_by_field_name("value")
            if target is not None and value is not None:
                assigned = walker.word(value) if value.type != "array" else None
                if assigned is None or not assigned.literal:
                    out.add(walker.text(target).partition("[")[0])
        elif n.type == "for_statement":
            var = n.child_by_field_name("variable")
            if var is not None:
                out.add(walker.text(var))
    return out


def _arith_parts(walker: ScriptWalker, n: Node) -> list[Node] | None:
    """The parts of ``n`` that bash evaluates as arithmetic, or None."""
    t = n.type
    if t in ("arithmetic_expansion", "c_style_for_statement"):
        return [c for c in n.children if c.is_named and c.type != "do_group"]
    if t == "compound_statement":
        first = n.children[0] if n.children else None
        return list(n.named_children) if first is not None and first.type == "((" else None
    if t == "subscript":
        kids = list(n.children)
        opens = [i for i, c in enumerate(kids) if c.type == "["]
        return [c for c in kids[opens[0] + 1 :] if c.type != "]"] if opens else None
    if t == "expansion":
        kids = list(n.children)
        colons = [i for i, c in enumerate(kids) if c.type == ":"]
        return [c for c in kids[colons[0] + 1 :] if c.is_named] if colons else None
    if t == "test_command":
        if not n.children or n.children[0].type != "[[":
            return None  # `[` (the test builtin) wants integers, it evaluates nothing
        parts: list[Node] = []
        for d in _descendants(n):
            if d.type == "binary_expression":
                ops = [c for c in d.children if c.type == "test_operator"]
                if ops and walker.text(ops[0]) in _ARITH_TESTS:
                    parts += [c for c in d.named_children if c.type != "test_operator"]
        return parts or None
    return None


def check(walker: ScriptWalker, nodes: list[Node], depth: int) -> list[Problem]:
    """Problems (each makes the line need approval) for the code-evaluating constructs in
    ``nodes``; literal code found in values is queued on ``walker.payloads``."""
    if not nodes:
        return []
    problems = []
    tainted = _tainted(walker, nodes)

    def payload(text: str, why: str) -> None:
        walker.payloads.append((text, why))

    problems += _recursive_functions(walker, [n for n in nodes if n.type == "function_definition"])
    for n in nodes:
        t = n.type
        src = walker.text(n)
        if t == "expansion":
            if src.endswith("@P}"):
                problems.append(_problem(src, "${x@P} runs the command substitutions in x"))
            inner = src[3:-1] if src.startswith("${!") else ""
            if inner and (m := re.match(r"[A-Za-z_][A-Za-z0-9_]*", inner)) and m[0] in tainted:
                problems.append(
                    _problem(src, f"{src} names a variable {m[0]} assigned from run-time data")
                )
        if t == "variable_assignment":
            name = n.child_by_field_name("name")
            base = walker.text(name).partition("[")[0] if name is not None else ""
            value = n.child_by_field_name("value")
            w = walker.word(value) if value is not None and value.type != "array" else None
            if risky_variable(base):
                problems.append(_problem(src, f"assigns {base}, which changes what runs"))
                if w is not None and w.literal and w.text.strip("|: "):
                    payload(w.text.lstrip("|"), f"{base} names a program to run")
                    continue
            if w is not None:
                if w.literal:
                    walker.literals.setdefault(base, set()).add(w.text)
                if w.literal and holds_code(w.text):
                    payload(w.text, f"the value assigned to {base} holds code bash may run")
        elif t == "declaration_command":
            keyword = walker.text(n.children[0]) if n.children else "declare"
            for arg in n.children[1:]:
                if arg.type in ("variable_assignment", "variable_name") or not arg.is_named:
                    if arg.type == "variable_name" and risky_variable(walker.text(arg)):
                        if keyword not in ("export", "readonly", "local"):
                            problems.append(_problem(src, f"{keyword} {walker.text(arg)}"))
                    continue
                w = walker.word(arg)
                if not w.literal:
                    problems.append(
                        _problem(
                            src,
                            f"{keyword} of {w.text}, only known at run time, may assign anything",
                        )
                    )
                    continue
                if w.text.startswith("-") or w.text.startswith("+"):
                    if "n" in w.text[1:]:
                        problems.append(_problem(src, f"{keyword} -n makes a name reference"))
                    continue
                lhs, eq, assigned = w.text.partition("=")
                base = lhs.partition("[")[0]
                if risky_variable(base):
                    problems.append(
                        _problem(src, f"{keyword} sets {base}, which changes what runs")
                    )
                if eq and (assigned.startswith("(") or "[" in lhs):
                    problems.append(
                        _problem(src, f"{keyword} evaluates the array assignment {w.text!r}")
                    )
                    payload(w.text, f"{keyword} evaluates it")
                elif eq and holds_code(assigned):
                    payload(assigned, f"the value assigned to {base} holds code bash may run")
        elif t == "unset_command":
            for arg in n.named_children:
                w = walker.word(arg)
                if w.literal and w.text.startswith("-"):
                    continue
                if not w.literal:
                    problems.append(_problem(src, f"unset {w.text}: a subscript may be code"))
                elif "[" in w.text:
                    problems.append(_problem(src, f"unset evaluates the subscript of {w.text}"))
                    payload(w.text.partition("[")[2].rpartition("]")[0], "unset evaluates it")
        elif t == "for_statement":
            var = n.child_by_field_name("variable")
            if var is not None and risky_variable(walker.text(var)):
                problems.append(_problem(src, f"the loop assigns {walker.text(var)}"))
        if t == "test_command":
            for d in _descendants(n):
                if d.type == "unary_expression" and walker.text(d).lstrip().startswith("-v"):
                    operand = d.named_children[-1] if d.named_children else None
                    if operand is not None and operand.type != "test_operator":
                        w = walker.word(operand)
                        if not w.literal or "[" in w.text:
                            problems.append(_problem(src, "[[ -v ]] evaluates a subscript"))
                            if w.literal:
                                payload(w.text.partition("[")[2].rpartition("]")[0], "[[ -v ]]")
        parts = _arith_parts(walker, n)
        if not parts:
            continue
        for part in parts:
            if part.type in ("raw_string", "string", "word", "concatenation"):
                w = walker.word(part)
                if w.literal and holds_code(w.text):
                    problems.append(_problem(src, f"arithmetic evaluates {w.text!r}"))
                    payload(w.text, "arithmetic evaluates it")
        if _has_substitution(parts):
            problems.append(
                _problem(
                    src, "a command's output is evaluated as arithmetic, where a[$(...)] would run"
                )
            )
        hit = sorted(_names(walker, parts) & tainted)
        if hit:
            problems.append(
                _problem(
                    src,
                    f"arithmetic evaluates {hit[0]}, assigned from run-time data, "
                    "where a[$(...)] would run",
                )
            )
    return problems


def _recursive_functions(walker: ScriptWalker, defs: list[Node]) -> list[Problem]:
    """A problem when functions this script defines call themselves or each other in a
    cycle (``:(){ :|:& };:``); a chain that ends (``f(){ g; }; g(){ ls; }``) is fine."""
    calls: dict[str, set[str]] = {}
    for n in defs:
        body = n.child_by_field_name("body")
        fname = n.child_by_field_name("name")
        if fname is None:  # tree-sitter gives every function_definition a name
            continue
        called = calls.setdefault(walker.text(fname), set())
        if body is not None:
            called.update(walker.text(d) for d in _descendants(body) if d.type == "command_name")
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in calls:
        if state.get(start):
            continue
        path = [(start, iter(sorted(calls[start] & calls.keys())))]
        state[start] = 1
        while path:
            name, todo = path[-1]
            nxt = next(todo, None)
            if nxt is None:
                state[name] = 2
                path.pop()
            elif state.get(nxt) == 1:
                return [_problem(nxt, f"the function {nxt} calls itself (runs without end?)")]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append((nxt, iter(sorted(calls[nxt] & calls.keys()))))
    return []


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_REF = rf"\$(?:\{{({_NAME})(?:(:?[-=])([^}}$`\\'\"]*))?\}}|({_NAME}))"
_REF_RE = re.compile(_REF)
_PLAIN = re.compile(rf"(?:[^$`\\'\"]|{_REF})*\Z")
_MAX_COPIES = 16


def _substitutions(w: Word, literals: dict[str, set[str]]) -> list[list[Word]] | None:
    """The words ``w`` becomes for each literal value of the variables it names
    (``$x``, ``"${x}"``, ``${x:-default}``), split as bash would when unquoted."""
    inner = w.text
    quoted = inner.startswith('"') and inner.endswith('"') and len(inner) > 1
    if quoted:
        inner = inner[1:-1]
    if not _PLAIN.match(inner):
        return None
    refs = _REF_RE.findall(inner)
    if not refs:
        return None
    texts = [inner]
    for braced, op, default, bare in refs:
        name = braced or bare
        values = set(literals.get(name, ()))
        if op:
            values.add(default)
        if not values:
            return None
        ref = next(
            m.group() for m in _REF_RE.finditer(texts[0]) if (m.group(1) or m.group(4)) == name
        )
        texts = [t.replace(ref, v, 1) for t in texts for v in sorted(values)][:_MAX_COPIES]
    if quoted or not w.splits:
        return [[Word(t)] for t in texts]
    separators = " \t\n" + "".join(literals.get("IFS", ()))
    split = re.compile(f"[{re.escape(separators)}]+")
    return [[Word(part) for part in split.split(t) if part] for t in texts]


def resolved_copies(cmd: SimpleCommand, literals: dict[str, set[str]]) -> list[SimpleCommand]:
    """``cmd`` with ``$NAME`` words replaced by the literal values this script assigns to
    NAME (``x=mkfs.ext4; $x /dev/sda``): the copies are judged besides the command."""
    if all(w.kind != "dynamic" for w in cmd.words):
        return []
    variants: list[list[Word]] = [[]]
    changed = False
    for w in cmd.words:
        subs = _substitutions(w, literals) if w.kind == "dynamic" else None
        if subs is None:
            variants = [[*v, w] for v in variants]
            continue
        changed = True
        variants = [v + s for v in variants for s in subs][:_MAX_COPIES]
    if not changed:
        return []
    return [replace(cmd, words=tuple(v), via=("$", *cmd.via)) for v in variants if v]
