"""Execpolicy: text bash never expands (single quotes, a quoted here-document's body,
the data around an unquoted one's expansions) is never judged as code, while code that
bash does run there is; and redirections after a here-document's delimiter count."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.sandbox.execpolicy.policy import Policy, PolicyContext
from tests.execpolicy.conftest import judge

CMD = "mkfs.ext4 /dev/sda"  # forbidden wherever it is hidden




@pytest.mark.parametrize(
    "command",
    [
        "cat <<'EOF'\nprice: $5 \"quoted\nEOF",
        'cat <<"EOF"\nprice: $5 "quoted $(rm -rf /) `rm -rf /`\nEOF',
        'cat <<EOF\nprice: $5 "quoted\nEOF',
        'cat <<-EOF\n\tprice: $5 "quoted\n\tEOF',
        'cat << EOF\na "$HOME" b " c\nEOF',
        'cat <<EOF\nsay "hi $USER" and ${HOME} "\nEOF',
        'cat <<EOF\nescaped \\$(rm -rf /) and \\`rm -rf /\\` "\nEOF',
        'cat <<EOF\nlist: $(ls "a b") " odd\nEOF',
        "[ 'a[$(CMD)]' -eq 0 ]",
        f"[ 'a[$({CMD})]' -eq 0 ]",
        "test 'a[$(id)]' -eq 0",
        'x=$(cat f); [ "$x" -eq 0 ]',
        "echo 'x $(rm -rf /) `rm -rf /`'",
    ],
)
def test_text_bash_does_not_expand_is_data(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "allow", why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f'cat <<EOF\nprice: $5 "quoted $({CMD})\nEOF', "forbidden"),
        (f'cat <<EOF\nprice: `{CMD}` "\nEOF', "forbidden"),
        (f'cat <<-EOF\n\t" ${{x:-$({CMD})}}\n\tEOF', "forbidden"),
        (f'cat << EOF\n" $(echo "$({CMD})")\nEOF', "forbidden"),
        ('cat <<EOF\n" $((1 + $(id)))\nEOF', "prompt"),
        ('cat <<EOF\n" ${x@P}\nEOF', "prompt"),
        ('cat <<EOF\n" $(unclosed\nEOF', "prompt"),
        # [[ ]] does evaluate a literal operand's subscript; [ -v ] evaluates one too
        ("[[ 'a[$(id)]' -eq 0 ]]", "prompt"),
        ('x=$(cat f); [[ "$x" -eq 0 ]]', "prompt"),
        ("[ -v 'a[$(id)]' ]", "prompt"),
    ],
)
def test_code_bash_runs_is_still_judged(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat <<'EOF' > ~/.bashrc\nhi\nEOF", "unmatched"),
        ("cat <<EOF >> /etc/profile\nhi\nEOF", "unmatched"),
        ("cat <<EOF 2>/etc/x\nhi\nEOF", "unmatched"),
        ("cat <<EOF > f.txt\nhi\nEOF", "unmatched"),
        ("cat <<EOF > /dev/sda\nhi\nEOF", "forbidden"),
        ("cat <<EOF < /proc/1/environ\nhi\nEOF", "prompt"),
        ("cat <<EOF | tee x > /dev/sda\nhi\nEOF", "forbidden"),
    ],
)
def test_redirections_after_a_heredoc_count(
    command: str, expected: str, ws: Path, home: Path
) -> None:
    """tree-sitter files `> f` of `cat <<EOF > f` under the here-document: it still
    writes f (before, `cat <<EOF > /dev/sda` was allowed)."""
    decision, why = judge(command, ws, home)
    assert decision == expected, why


def test_a_later_command_does_not_take_a_heredocs_redirection(ws: Path, home: Path) -> None:
    ev = Policy().evaluate(
        "cat <<EOF > out.txt && ls\nhi\nEOF",
        PolicyContext(cwd=ws, writable_roots=(ws,), home=home),
    )
    by_name = {v.command.split()[0]: v.verdict for v in ev.verdicts}
    assert by_name == {"cat": "unmatched", "ls": "allow"}, ev.verdicts
