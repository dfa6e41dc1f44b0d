"""Where a node sits in a tree-sitter-bash tree: what bash reads as one word, which
command a redirection or a pipe belongs to."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Node


def same(a: Node | None, b: Node | None) -> bool:
    return a is not None and b is not None and a.id == b.id


def redirect_owner(redirect: Node) -> Node | None:
    """The command a redirection belongs to (the body of its redirected_statement)."""
    parent = redirect.parent
    if parent is None:
        return None
    if parent.type == "command":
        return parent
    if parent.type == "redirected_statement":
        body = parent.child_by_field_name("body")
        return body if body is not None and body.type == "command" else None
    return None


def after_heredocs(redirects: list[Node], node: Node) -> list[Node]:
    """Redirections written after a here-document's delimiter (``cat <<EOF > f``):
    tree-sitter files them under the here-document, up to a ``|``, ``&&``, ``;``..."""
    out = []
    for r in redirects:
        if r.type != "heredoc_redirect" or not same(redirect_owner(r), node):
            continue
        for c in r.children:
            if c.type in ("<<", "<<-", "heredoc_start"):
                continue
            if not c.type.endswith("_redirect"):
                break
            out.append(c)
    return out


def runs_a_command(statement: Node) -> bool:
    """Whether a simple command inside ``statement`` carries its redirections."""
    stack = [c for c in statement.children if not c.type.endswith("_redirect")]
    while stack:
        n = stack.pop()
        if n.type == "command":
            return True
        stack.extend(n.children)
    return False


def pipe_source(node: Node) -> Node | None:
    """The pipeline element ``node`` reads its standard input from, if any."""
    child, parent = node, node.parent
    while parent is not None and parent.type == "redirected_statement":
        child, parent = parent, parent.parent
    if parent is None or parent.type != "pipeline":
        return None
    before = child.prev_named_sibling  # not a scan of the children: `ls | ls | ...` is long
    if before is not None:
        return before
    # `cat <<END | sh`: tree-sitter files the pipeline under the here-document
    holder = parent.parent
    if holder is not None and holder.type in ("heredoc_redirect", "herestring_redirect"):
        return holder.parent
    return None


def touching(parts: list[Node]) -> list[list[Node]]:
    """``parts`` grouped into the words bash sees: nodes that touch are one word."""
    groups: list[list[Node]] = []
    for p in parts:
        if groups and groups[-1][-1].end_byte == p.start_byte:
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups
