"""The walk over a tree-sitter-bash tree that collects every simple command.

``Walker`` visits every node of a parsed script (``shell_parse.parse_script`` parses it
and expands what the walk found): each ``command`` with its words and redirections, the
places bash evaluates data as code, here-document bodies, and payloads that are run as
scripts (``bash -c``, ``eval``, an interpreter's inline code).
"""

from __future__ import annotations

import functools
import os.path
import re
from typing import TYPE_CHECKING

from codemode.sandbox.execpolicy import code_checks, heredocs
from codemode.sandbox.execpolicy.continuations import quoted_heredoc
from codemode.sandbox.execpolicy.safe_args import interpreters
from codemode.sandbox.execpolicy.script_types import Problem, SimpleCommand, Stdin
from codemode.sandbox.execpolicy.shell_nodes import (
    after_heredocs,
    pipe_source,
    redirect_owner,
    runs_a_command,
    same,
    touching,
)
from codemode.sandbox.execpolicy.words import (
    Word,
    decode_ansi_c,
    finish,
    unescape_double_quoted,
    unquoted_chars,
)
from codemode.sandbox.execpolicy.wrapper_table import shells

if TYPE_CHECKING:
    from tree_sitter import Node

# Output redirections to these do not write anything worth asking about.
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution"})
_UNSPLIT_DYNAMIC = frozenset({"arithmetic_expansion", "process_substitution"})

# Nodes whose text tree-sitter may leave unparsed although bash expands it.
_MAY_HIDE = frozenset({"word", "expansion", "regex"})


class Walker:
    """Visits every node, collecting each ``command`` with its redirections."""

    def __init__(self, src: bytes, depth: int) -> None:
        self.src = src
        self.depth = depth
        self.found: list[tuple[SimpleCommand, Stdin | None]] = []
        self.problems: list[Problem] = []
        self.code_nodes: list[Node] = []
        self.literals: dict[str, set[str]] = {}
        self.payloads: list[tuple[str, str]] = []  # (script, why): decided as commands
        self.expanded: list[str] = []  # here-document bodies, as the words bash expands

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def visit(self, node: Node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type == "command":
                self.command(n)
            elif n.type == "redirected_statement" and not runs_a_command(n):
                # `> /dev/sda` alone, `[[ -n x ]] > f`, `(( 1 )) > f` still open (and
                # truncate) what they redirect to
                self.command(n, bare=True)
            elif n.type in code_checks.NODE_TYPES:
                self.code_nodes.append(n)
            elif n.type == "heredoc_body" and not quoted_heredoc(n):
                self.heredoc_expansions(n)
            if n.type in _MAY_HIDE and (
                self.src.find(b"`", n.start_byte, n.end_byte) >= 0
                or self.src.find(b"$(", n.start_byte, n.end_byte) >= 0
            ):
                self.missed_substitutions(n)
            if n.type == "command_substitution":
                self.file_substitution(n)
            if n.type == "command_substitution" and self.src[n.start_byte] == 0x60:
                text = self.text(n)
                if "\\`" in text:  # `echo \`CMD\``: inside backquotes \` nests one
                    self.expanded.append(text[1:-1].replace("\\`", "`"))
            stack.extend(reversed(n.children))
        self.problems.extend(code_checks.check(self, self.code_nodes, self.depth))

    def file_substitution(self, node: Node) -> None:
        """``$(< FILE)`` is bash's ``$(cat FILE)``: judged as that command."""
        for r in node.children:
            dests = r.children_by_field_name("destination") if r.type == "file_redirect" else []
            if dests:
                cmd = SimpleCommand(words=(Word("cat"), self.word(dests[0])), source=self.text(r))
                self.found.append((cmd, None))

    def heredoc_expansions(self, body: Node) -> None:
        """tree-sitter leaves the substitutions of some here-documents unparsed (`<< X`
        with a space, `<<-X`, backquotes); bash runs them all, so each expansion of the
        body is parsed again as the double-quoted word it expands like (one that does
        not parse that way is a problem, so asked about). The text around them is data:
        a lone `"` there is no quote."""
        script = heredocs.as_script(self.text(body))
        if script is not None:
            self.expanded.append(script)

    def missed_substitutions(self, node: Node) -> None:
        """Command substitutions tree-sitter reads as plain text (``${x:=`CMD`}``,
        ``${x#$(CMD)}``, a backquote escaped inside backquotes): bash runs them, so each
        is decided as a script (a quoted look-alike is decided too: stricter, never
        looser)."""
        stack = list(node.children)
        while stack:
            d = stack.pop()
            if d.type == "command_substitution":
                return
            stack.extend(d.children)
        text = self.text(node).replace("\\`", "`")
        self.expanded.extend(m.group(1) for m in re.finditer(r"`([^`]*)`", text))
        at = text.find("$(")
        while at != -1:
            depth, end = 0, at + 1
            while end < len(text):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
                end += 1
            self.expanded.append(text[at + 2 : end])
            at = text.find("$(", end)

    def command(self, node: Node, *, bare: bool = False) -> None:
        name = node.child_by_field_name("name")
        if name is None and not bare:
            return  # only assignments
        parts: list[Node] = [name, *node.children_by_field_name("argument")] if name else []
        redirects = [c for c in node.children if c.type.endswith("_redirect")]
        # Redirections written around the command (redirected_statement) apply to it,
        # up to the nearest $(...) or <(...), whose output goes elsewhere.
        outer = node.parent
        while outer is not None and outer.type not in _SUBSTITUTIONS:
            # `f() { ...; } > FILE`: every run of f writes FILE
            if outer.type in ("redirected_statement", "function_definition"):
                redirects.extend(c for c in outer.children if c.type.endswith("_redirect"))
            outer = outer.parent
        redirects += after_heredocs(redirects, node)
        writes: list[str] = []
        write_words: list[Word] = []
        reads: list[Word] = []
        stdin: Stdin | None = None
        for r in redirects:
            dests = r.children_by_field_name("destination")
            if len(dests) > 1 and same(redirect_owner(r), node):
                # bash: `cmd > f x` is `cmd x > f`; tree-sitter files x under the redirect.
                parts.extend(dests[1:])
            op = next((c.type for c in r.children if not c.is_named), "")
            if r.type == "file_redirect" and dests and (">" in op and op not in (">&", "<&")):
                w = self.word(dests[0])
                if not (w.literal and _harmless_target(w.text)):
                    writes.append(w.text)
                    write_words.append(w)
            elif r.type == "file_redirect" and dests and op in (">&", "&>", "&>>"):
                w = self.word(dests[0])
                if not w.text.isdigit() and w.text != "-" and not _harmless_target(w.text):
                    writes.append(w.text)
                    write_words.append(w)
            elif r.type == "file_redirect" and op == "<" and dests:
                read = self.word(dests[0])
                stdin = ("file", read)
                reads.append(read)
            elif r.type == "file_redirect" and dests:  # <>, <&FILE: opened too
                w = self.word(dests[0])
                if not (w.text.isdigit() or w.text in ("-", "")):
                    reads.append(w)
            elif r.type == "heredoc_redirect" and same(redirect_owner(r), node):
                stdin = self.heredoc(r)
            elif r.type == "herestring_redirect" and same(redirect_owner(r), node):
                value = next((c for c in r.children if c.is_named), None)
                stdin = ("text", self.word(value) if value is not None else Word(""))
        parts.sort(key=lambda n: n.start_byte)
        words = tuple(w for g in touching(parts) for w in _brace_words(self.joined(g)))
        if bare:
            words = (Word(":"),)
        before = pipe_source(node)
        if before is not None and stdin is None:
            shell = (
                words and words[0].literal and os.path.basename(words[0].text) in _code_readers()
            )
            stdin = self.piped_text(before) if shell else ("pipe", None)
        self.found.append(
            (
                SimpleCommand(
                    words=words,
                    source=self.text(node),
                    writes=tuple(writes),
                    write_words=tuple(write_words),
                    reads=tuple(reads),
                ),
                stdin,
            )
        )

    def piped_text(self, before: Node) -> Stdin:
        """What a command reads from the pipe: the text when the command before it is an
        ``echo`` or ``printf`` of literal words, else unknown."""
        if before.type == "redirected_statement":
            body = before.child_by_field_name("body")
            name = body.child_by_field_name("name") if body is not None else None
            if body is not None and name is not None and self.text(name) == "cat":
                for r in before.children:
                    if r.type == "heredoc_redirect" and len(body.named_children) == 1:
                        return ("pipe-text", self.heredoc(r)[1])
                    if r.type == "herestring_redirect":
                        value = next((c for c in r.children if c.is_named), None)
                        if value is not None:
                            return ("pipe-text", self.word(value))
            return ("pipe", None)
        if before.type == "command":
            words = [self.word(c) for c in before.children if c.is_named]
            names = [w.text for w in words[:1]]
            if names and names[0] in ("echo", "printf") and all(w.literal for w in words):
                args = [w.text for w in words[1:] if not w.text.startswith("-")]
                text = " ".join(args).replace("\\n", "\n").replace("%s", "")
                return ("pipe-text", Word(text))
        return ("pipe", None)

    def heredoc(self, redirect: Node) -> tuple[str, Word]:
        body = next((c for c in redirect.children if c.type == "heredoc_body"), None)
        if body is None:
            return ("text", Word(""))
        text = self.text(body)
        if quoted_heredoc(body):
            return ("text", Word(text))
        if any(
            c.type in ("simple_expansion", "expansion", "command_substitution")
            for c in body.children
        ):
            return ("text", Word(text, "dynamic"))
        return ("text", Word(unescape_double_quoted(text)))

    def joined(self, nodes: list[Node]) -> Word:
        """One word of nodes with nothing between them: tree-sitter splits `$a/$b/c` into
        `$a/$` and `b/c`, bash reads one word."""
        if len(nodes) == 1:
            return self.word(nodes[0])
        chars: list[tuple[str, bool]] = []
        dynamic = splits = False
        for n in nodes:
            if n.type == "command_name":
                n = n.named_children[0] if len(n.named_children) == 1 else n
            c, d, sp = self.chars(n)
            chars += c
            dynamic, splits = dynamic or d, splits or sp
        source = self.src[nodes[0].start_byte : nodes[-1].end_byte].decode("utf-8", "replace")
        return finish(chars, dynamic=dynamic, splits=splits, source=source)

    def word(self, node: Node) -> Word:
        """The value of one word node, or a dynamic Word when it depends on run time."""
        t = node.type
        source = self.text(node)
        if t == "command_name":
            inner = node.named_children
            return self.word(inner[0]) if len(inner) == 1 else Word(source, "dynamic", True)
        if t in (
            "concatenation",
            "word",
            "number",
            "string",
            "raw_string",
            "ansi_c_string",
            "brace_expression",
        ):
            chars, dynamic, splits = self.chars(node)
            return finish(chars, dynamic=dynamic, splits=splits, source=source)
        return Word(source, "dynamic", t not in _UNSPLIT_DYNAMIC)

    def chars(self, node: Node) -> tuple[list[tuple[str, bool]], bool, bool]:
        t = node.type
        text = self.text(node)
        if t in ("word", "number", "brace_expression"):
            return unquoted_chars(text), False, False
        if t == "raw_string":
            return [(c, True) for c in text[1:-1]], False, False
        if t == "ansi_c_string":
            return [(c, True) for c in decode_ansi_c(text[2:-1])], False, False
        if t == "string":
            out: list[tuple[str, bool]] = []
            dynamic = False
            pos = node.start_byte + 1
            for c in node.children:
                if not c.is_named:
                    continue
                gap = self.src[pos : c.start_byte].decode("utf-8", errors="replace")
                out += [(ch, True) for ch in unescape_double_quoted(gap)]
                if c.type == "string_content":
                    out += [(ch, True) for ch in unescape_double_quoted(self.text(c))]
                else:
                    dynamic = True  # "$x" is one word, but its value is unknown
                pos = c.end_byte
            tail = self.src[pos : max(pos, node.end_byte - 1)].decode("utf-8", errors="replace")
            out += [(ch, True) for ch in unescape_double_quoted(tail)]
            return out, dynamic, False
        if t == "concatenation":
            out = []
            dynamic = splits = False
            for c in node.children:
                if c.type in (
                    "word",
                    "number",
                    "string",
                    "raw_string",
                    "ansi_c_string",
                    "concatenation",
                ):
                    sub, d, s = self.chars(c)
                    out += sub
                    dynamic, splits = dynamic or d, splits or s
                elif c.type == "brace_expression":
                    out += unquoted_chars(self.text(c))  # {1..3}: expanded by finish()
                else:
                    dynamic = True
                    splits = splits or c.type not in _UNSPLIT_DYNAMIC
            return out, dynamic, splits
        return [], True, t not in _UNSPLIT_DYNAMIC


@functools.cache
def _code_readers() -> frozenset[str]:
    """Shells and interpreters: what they read on a pipe is a program."""
    return shells() | frozenset(interpreters())


def _harmless_target(text: str) -> bool:
    return text in HARMLESS_TARGETS or bool(_FD_TARGET.match(text))


_FD_TARGET = re.compile(r"/dev/fd/\d+\Z")


def _brace_words(w: Word) -> list[Word]:
    """A word with a brace expansion as the words bash makes of it (``{rm,-rf,/}``)."""
    if not w.braces:
        return [w]
    return [Word(b, "glob" if any(c in b for c in "*?[") else "literal") for b in w.braces]
