"""Every simple command of a shell script, found with tree-sitter-bash.

A simple command is what bash actually executes: a name and its arguments. They hide
inside pipelines, lists (``&&``, ``||``, ``;``, newlines), subshells, braces, loops,
conditionals, functions, ``$(...)``, backticks, process substitutions and here-documents;
the walk (``shell_walk``) visits every node of the tree, so none is missed. What bash would run
indirectly (``bash -c``, ``env``, ``xargs``, ``find -exec``...) is looked through by
``unwrap``.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from codemode.sandbox.execpolicy import code_checks, line_checks, unwrap
from codemode.sandbox.execpolicy.continuations import join_continuations

# Re-exported: the parse result's types live in a leaf module that the checks and
# ``unwrap`` share (``unwrap`` recurses into nested scripts through ``Nesting``).
from codemode.sandbox.execpolicy.script_types import MAX_DEPTH as MAX_DEPTH
from codemode.sandbox.execpolicy.script_types import Nesting
from codemode.sandbox.execpolicy.script_types import ParsedScript as ParsedScript
from codemode.sandbox.execpolicy.script_types import Problem as Problem
from codemode.sandbox.execpolicy.script_types import SimpleCommand as SimpleCommand
from codemode.sandbox.execpolicy.script_types import with_words as with_words
from codemode.sandbox.execpolicy.shell_walk import Walker

if TYPE_CHECKING:
    from tree_sitter import Node, Parser


@functools.cache
def _parser() -> Parser:
    # Imported here: tree-sitter is only needed once a shell command is checked.
    import tree_sitter  # lazy: tree-sitter, with the first command checked
    import tree_sitter_bash  # lazy: tree-sitter, with the first command checked

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


_CONTROL = re.compile(r"[\x01-\x08\x0b-\x1f\x7f]")


def parse_script(script: str, *, depth: int = 0) -> ParsedScript:
    """All simple commands of ``script`` (recursively through wrappers), plus problems."""
    result = ParsedScript()
    if depth > MAX_DEPTH:
        result.problems.append(Problem(script, f"shell scripts nested more than {MAX_DEPTH} deep"))
        return result
    if "\0" in script:
        result.problems.append(Problem(script, "the command contains a NUL character"))
        return result
    if _CONTROL.search(script):
        # bash splits words on none of these, tree-sitter on some (`ls\rCMD` is one word
        # to bash, two commands to the parser): what runs is not what is judged
        result.problems.append(Problem(script, "the command contains control characters"))
    src = script.encode("utf-8", errors="surrogateescape")
    parser = _parser()
    tree = parser.parse(src)
    joined = join_continuations(src, tree.root_node)
    if joined != src:
        src, tree = joined, parser.parse(joined)
    root = tree.root_node
    if root.has_error:
        where = _first_error(root)
        result.problems.append(
            Problem(script, f"the command does not parse cleanly as bash (near {where!r})")
        )
        for cmd in line_checks.fallback_commands(script):
            result.extend(unwrap.expand(cmd, nesting=Nesting(depth, parse_script)))
    walker = Walker(src, depth)
    walker.visit(root)
    result.problems.extend(walker.problems)
    result.literals = walker.literals
    for body in walker.expanded:
        result.extend(parse_script(body, depth=depth + 1))
    for payload, why in walker.payloads:
        inner = parse_script(payload, depth=depth + 1)
        result.extend(inner)
        result.problems.append(Problem(payload, why))
    written = line_checks.written_scripts(walker.found)
    for cmd, stdin in walker.found:
        result.extend(unwrap.expand(cmd, nesting=Nesting(depth, parse_script), stdin=stdin))
        script_text = line_checks.runs_written(cmd, written)
        if script_text is not None:
            result.extend(parse_script(script_text, depth=depth + 1))
            result.problems.append(Problem(cmd.source, "runs a script this command line writes"))
        for copy in code_checks.resolved_copies(cmd, walker.literals):
            result.extend(unwrap.expand(copy, nesting=Nesting(depth, parse_script), stdin=stdin))
    return result


def _first_error(root: Node) -> str:
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "ERROR" or n.is_missing:
            return _text_of(n)[:40] or n.type
        stack.extend(reversed(n.children))
    return ""


def _text_of(node: Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")
