"""Patch text to a ``Patch``: unwrap, lex line by line, then lark's LALR parser over the
grammar of record, ``codemode/tools/apply_patch.lark``.

The line lexer (see ``lexer``) hands lark one token per marker line and one per run of
like change lines, so lark checks the structure and builds the model without scanning
the text character by character: a 10,000-line patch parses in about 20 ms.
``parse_canonical`` parses canonical text with lark's own lexer and the grammar's
terminals (one token per line), which keeps the grammar honest: the tests run both and
compare.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput, UnexpectedToken, VisitError
from lark.lexer import Lexer

from codemode.tools.patch import lexer as line_lexer
from codemode.tools.patch import unified
from codemode.tools.patch.errors import PatchError
from codemode.tools.patch.lenient import Unwrapped, unwrap
from codemode.tools.patch.model import AddFile, Chunk, DeleteFile, Patch, UpdateFile

# "@@ -12,3 +12,4 @@ optional text": a unified-diff hunk header inside an apply_patch
# patch. Its old start line becomes a hint for where the chunk applies.
_RANGE_HEADER = re.compile(r"-(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@.*")


def grammar_text() -> str:
    """The lark grammar of the apply_patch format."""
    return files("codemode.tools").joinpath("apply_patch.lark").read_text(encoding="utf-8")


def parse_patch(text: str) -> tuple[Patch, str | None]:
    """Parse a patch in the apply_patch format or a unified diff.

    Returns the patch and the directory of a ``cd DIR && apply_patch <<EOF`` wrapper
    (None without one). Raises PatchError with a message meant for a model to act on.
    """
    wrapped = unwrap(text)
    if not wrapped.lines:
        raise PatchError("The patch is empty.", show_format=True)
    if unified.looks_unified(wrapped.lines):
        return unified.parse_unified(wrapped.lines, wrapped.first_line), wrapped.workdir
    return parse_lines(wrapped), wrapped.workdir


def parse_lines(wrapped: Unwrapped) -> Patch:
    tokens = line_lexer.lex(wrapped.lines, wrapped.first_line)
    try:
        return _token_parser().parse(tokens)
    except UnexpectedToken as exc:
        raise PatchError(_describe(exc, tokens), show_format=True) from None
    except VisitError as exc:
        raise exc.orig_exc from None


def parse_canonical(text: str) -> Patch:
    """Parse text already in canonical form with lark's own lexer (the grammar's
    terminals); no leniency. Used to check the grammar against the line lexer."""
    try:
        return _text_parser().parse(text)
    except UnexpectedInput as exc:
        raise PatchError(f"Line {exc.line} of the patch: {exc}", show_format=True) from None


class _TokenList(Lexer):
    """Lark "lexer" that hands on the tokens ``lexer.lex`` already made."""

    def __init__(self, lexer_conf: object) -> None:
        pass

    def lex(self, data: list[Token]) -> list[Token]:  # type: ignore[override]
        return data


@cache
def _token_parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer=_TokenList, transformer=_Build())


@cache
def _text_parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", lexer="basic", transformer=_Build())


def _value(tok: Token) -> str:
    return tok[:-1] if tok.endswith("\n") else str(tok)


def _lines(tok: Token) -> list[str]:
    """The lines of a change token (one, or a run of them from the line lexer)."""
    return _value(tok).split("\n")


def _path(tok: Token) -> str:
    return _value(tok).split(": ", 1)[1]


class _Build(Transformer):
    """Builds the model while lark reduces (no parse tree is kept)."""

    def start(self, children: list) -> Patch:
        return Patch(children[1:-1])

    def add_file(self, children: list) -> AddFile:
        head, *runs = children
        return AddFile(_path(head), head.line, [line[1:] for t in runs for line in _lines(t)])

    def delete_file(self, children: list) -> DeleteFile:
        return DeleteFile(_path(children[0]), children[0].line)

    def update_file(self, children: list) -> UpdateFile:
        head, *rest = children
        move_to = None
        if isinstance(rest[0], Token):
            move_to = _path(rest.pop(0))
        for number, chunk in enumerate(rest, 1):
            chunk.number = number
        return UpdateFile(_path(head), head.line, move_to, rest)

    def first_chunk(self, children: list) -> Chunk:
        return self.chunk(children)

    def chunk(self, children: list) -> Chunk:
        chunk = Chunk(number=0, line=children[0].line)
        if children[-1].type == "END_OF_FILE":
            chunk.at_end = True
            children = children[:-1]
        while children[0].type == "CHUNK_HEADER":
            header = _value(children[0])[3:]
            m = _RANGE_HEADER.fullmatch(header)
            if m is not None:
                start, count = int(m.group(1)), m.group(2)
                chunk.hint = start if count == "0" else max(start - 1, 0)
            elif header.strip():
                chunk.anchors.append(header)
            children = children[1:]
        chunk.lines = [(line[0], line[1:]) for t in children for line in _lines(t)]  # type: ignore[misc]
        return chunk


_NAMES = {
    "BEGIN_PATCH": "'*** Begin Patch'",
    "END_PATCH": "'*** End Patch'",
    "ADD_FILE": "'*** Add File: PATH'",
    "DELETE_FILE": "'*** Delete File: PATH'",
    "UPDATE_FILE": "'*** Update File: PATH'",
    "MOVE_TO": "'*** Move to: PATH'",
    "END_OF_FILE": "'*** End of File'",
    "CHUNK_HEADER": "an '@@' line",
    "CONTEXT_LINE": "a context line (' ')",
    "REMOVED_LINE": "a removed line ('-')",
    "ADDED_LINE": "an added line ('+')",
    "$END": "the end of the patch",
}
_CHANGES = {"CONTEXT_LINE", "REMOVED_LINE", "ADDED_LINE"}


def _describe(exc: UnexpectedToken, tokens: list[Token]) -> str:
    """A parse error in words: what came, where, and what should have."""
    tok = exc.token
    if tok.type in _CHANGES:
        tok = Token(tok.type, _lines(tok)[0], start_pos=tok.start_pos, line=tok.line)
    index = tok.start_pos if isinstance(tok.start_pos, int) else len(tokens)
    prev = tokens[index - 1] if 0 < index <= len(tokens) else None
    where = f"Line {tok.line} of the patch"
    expected = set(exc.expected)
    if prev is not None and prev.type == "BEGIN_PATCH" and tok.type == "END_PATCH":
        return "The patch is empty: it has no file sections between the markers."
    if prev is not None and prev.type in ("UPDATE_FILE", "MOVE_TO") and expected & _CHANGES:
        head = prev if prev.type == "UPDATE_FILE" else tokens[index - 2]
        return (
            f"'{head}' (line {head.line}) has no changes. An update needs at least one "
            "chunk: context lines starting with ' ', removed lines with '-', added lines "
            "with '+'."
        )
    if prev is not None and prev.type == "CHUNK_HEADER" and expected & _CHANGES:
        return (
            f"{where}: the '{prev}' line at line {prev.line} is not followed by any "
            "' ', '-' or '+' line."
        )
    if prev is not None and prev.type == "END_OF_FILE" and tok.type in _CHANGES:
        return f"{where}: after '*** End of File' a new chunk must start with an '@@' line."
    if tok.type == "MOVE_TO":
        return f"{where}: '{tok}' must come right after its '*** Update File:' line."
    if tok.type in _CHANGES | {"CHUNK_HEADER", "END_OF_FILE"}:
        return f"{where}: {tok!r} is outside any '*** Update File:' section."
    if tok.type == "$END" or "$END" in expected:
        return f"{where}: {str(tok)!r} comes after '*** End Patch'."
    wanted = ", ".join(sorted(_NAMES.get(name, name) for name in expected))
    return f"{where}: unexpected {str(tok)!r}; expected {wanted}."
