"""Execpolicy: reading secrets needs approval, however the path is spelled: another
process's state (/proc/PID/environ, mem, fd, root, cwd; ``ps e``) and credential files
(~/.ssh/id_*, ~/.netrc, /etc/shadow...); harmless /proc and home reads stay allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode.sandbox.execpolicy.policy import Policy, PolicyContext
from tests.execpolicy.conftest import judge

SECRET_READS = [
    "cat /proc/1/environ",
    "cat /proc/self/environ",
    "cat /proc/thread-self/environ",
    "cat /proc/1/task/1/environ",
    "head /proc/1/environ",
    "tail -c 100 /proc/1/environ",
    "strings /proc/1/environ",
    "xxd /proc/1/environ",
    "od -c /proc/1/environ",
    "base64 /proc/1/environ",
    "sort /proc/1/environ",
    "wc /proc/1/environ",
    "diff /proc/1/environ /dev/null",
    "grep -a KEY /proc/1/environ",
    "rg -a . /proc/1/environ",
    "less /proc/1/environ",
    "tr '\\0' '\\n' < /proc/1/environ",
    "cat < /proc/1/environ",
    "cat 0</proc/1/environ",
    "exec 3</proc/1/environ; cat <&3",
    "cat 3</proc/1/environ",
    "grep -f/proc/1/environ x",
    "grep --file=/proc/1/environ x",
    # spelled through globs, variables, quotes, braces, ANSI-C quoting, dot segments
    "cat /proc/*/environ",
    "cat /proc/[0-9]*/environ",
    "cat /proc/**/environ",
    "cat /p*/1/env*",
    "cat /proc/$PPID/environ",
    "cat /proc/$$/environ",
    "cat /pr$(echo oc)/1/envir$(echo on)",
    "p=1; cat /proc/$p/environ",
    "x=/proc/1/environ; cat $x",
    'cat "/proc/1/environ"',
    "cat '/proc/1/'\"environ\"",
    "cat {/proc/1/environ,x}",
    "cat $'/proc/1/\\x65nviron'",
    "cat /proc/1/../1/environ",
    "cat /proc//1/environ",
    "cat /proc/1/./environ",
    # through a cd, a wrapper, a nested shell
    "cd /proc/1 && cat environ",
    "cd /proc && cd self && cat environ",
    "bash -c 'cat /proc/1/environ'",
    "env cat /proc/1/environ",
    # memory, open files, the root and working directory of another process
    "cat /proc/1/mem",
    "cat /proc/1/maps",
    "cat /proc/1/smaps",
    "ls /proc/1/fd",
    "cat /proc/1/fd/3",
    "cat /proc/self/fd/7",
    "cat /proc/1/root/etc/shadow",
    "ls /proc/1/cwd/",
    "cat /proc/self/cwd/x",
    "cat /proc/1/cwd/../x",
    "echo x > /proc/1/fd/1",
    "cat /proc/kcore",
    # programs that read whole trees, given / or /proc
    "grep -r KEY /proc",
    "grep -rn KEY /proc/1",
    "rg KEY /",
    "tar cf - /proc/1 | cat",
    "cp -r /proc/self/ x",
    "find /proc -name environ -exec cat {} +",
    "find /proc -name environ | xargs cat",
    'while read f; do cat "$f"; done < <(find /proc -name environ)',
]


@pytest.mark.parametrize("command", SECRET_READS)
def test_reading_process_state_needs_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt", why
    assert "reads secrets" in why and "environment" in why, why


PS_ENV = [
    "ps e",
    "ps eww",
    "ps auxe",
    "ps axe",
    "ps -aux e",
    "ps -E",
    "ps -o environ",
    "ps -eo pid,environ",
    "ps o pid,env",
    "ps --format=pid,environ",
]


@pytest.mark.parametrize("command", PS_ENV)
def test_ps_showing_environments_needs_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt", why
    assert "environment" in why, why


HARMLESS = [
    "ps aux",
    "ps -ef",
    "ps -e",
    "ps -p 1 -o pid,cmd",
    "ps --format pid,cmd",
    "ps -C bash-e",
    "cat /proc/1/cmdline",
    "cat /proc/1/status",
    "cat /proc/self/status",
    "cat /proc/self/fd/0",
    "cat /proc/cpuinfo",
    "cat /proc/meminfo",
    "cat /proc/1/ns/mnt",
    "ls /proc",
    "ls /proc/1",
    "ls -la /proc/self/",
    "find /proc -maxdepth 1 -name '[0-9]*'",
    "find / -name '*.py'",
    "grep -rn foo .",
    'cat "$f"',
    'cat "$d/src/main.py"',
    'cd "$X" && cat README.md',
]


@pytest.mark.parametrize("command", HARMLESS)
def test_harmless_secret_reads_stay_allowed(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "allow", why


def test_a_link_in_the_workspace_to_process_state(ws: Path, home: Path) -> None:
    (ws / "env.txt").symlink_to(f"/proc/{os.getpid()}/environ")
    (ws / "root").symlink_to("/proc/1/root")
    assert judge("cat env.txt", ws, home)[0] == "prompt"
    assert judge("cat root/etc/passwd", ws, home)[0] == "prompt"
    (ws / "plain.txt").write_text("x")
    assert judge("cat plain.txt", ws, home)[0] == "allow"


def test_an_unknown_directory_and_a_process_entry_name(ws: Path, home: Path) -> None:
    """After `cd "$X"` a relative `environ` may be /proc/N/environ."""
    assert judge('cd "$X" && cat environ', ws, home)[0] == "prompt"


def test_a_user_allow_rule_does_not_open_process_state(ws: Path, home: Path) -> None:
    (home / "rules").mkdir(parents=True)
    (home / "rules" / "mine.rules").write_text('prefix_rule(pattern=["cat"], decision="allow")\n')
    policy = Policy.load(ws)
    ctx = PolicyContext(cwd=ws, writable_roots=(ws,), home=home)
    assert policy.evaluate("cat /proc/1/environ", ctx).decision == "prompt"
    assert policy.evaluate("cat notes.txt", ctx).decision == "allow"


def _home_ctx(ws: Path, home: Path) -> PolicyContext:
    return PolicyContext(cwd=ws, writable_roots=(ws,), home=home)


CREDENTIAL_READS = [
    "cat {h}/.ssh/id_rsa",
    "cat {h}/.ssh/id_ed25519",
    "cat {h}/.ssh/*",
    "cat {h}/.ssh/id_e*",
    "cat ~/.ssh/id_rsa",
    "cat $HOME/.ssh/id_rsa",
    'cat "$HOME/.netrc"',
    "cat ${{HOME}}/.aws/credentials",
    "head {h}/.netrc",
    "cat {h}/.git-credentials",
    "cat {h}/.config/gh/hosts.yml",
    "cat {h}/.gnupg/private-keys-v1.d/x.key",
    "tail -n 100 {h}/.bash_history",
    "cat /etc/shadow",
    "cat /etc/ssh/ssh_host_ed25519_key",
    "cd {h} && cat .netrc",
    "cd {h}/.ssh && cat id_rsa",
    "grep -r password {h}",
    "rg token ~",
    "tar czf x.tgz {h}/.ssh",
    "find {h} -name 'id_*' | xargs cat",
]


@pytest.mark.parametrize("template", CREDENTIAL_READS)
def test_reading_credential_files_needs_approval(template: str, ws: Path, home: Path) -> None:
    command = template.format(h=home)
    ev = Policy().evaluate(command, _home_ctx(ws, home))
    d = ev.deciding
    why = f"{d.rule} / {d.justification}" if d else ""
    assert ev.decision == "prompt", why
    assert "reads secrets" in why and "credential" in why, why


@pytest.mark.parametrize(
    "template",
    [
        "cat {h}/.ssh/id_rsa.pub",
        "cat {h}/.ssh/*.pub",
        "cat {h}/.ssh/known_hosts",
        "cat {h}/.bashrc",
        "cat /etc/passwd",
        "ls -la {h}",
        "du -sh {h}",
        'ls {h} && echo "$x"',
        "grep -r x {h}/projects",
    ],
)
def test_ordinary_home_reads_stay_allowed(template: str, ws: Path, home: Path) -> None:
    ev = Policy().evaluate(template.format(h=home), _home_ctx(ws, home))
    assert ev.decision == "allow", ev.deciding


@pytest.mark.parametrize(
    "command",
    [
        "echo $(< /proc/1/environ)",
        "x=$(</proc/1/environ)",
        "printf '%s' \"$(</etc/shadow)\"",
        "echo `< /proc/1/environ`",
    ],
)
def test_a_file_substitution_reads_the_file(command: str, ws: Path, home: Path) -> None:
    """`$(< FILE)` is `$(cat FILE)` (it was allowed as `echo` alone)."""
    decision, why = judge(command, ws, home)
    assert decision == "prompt" and "reads secrets" in why, why
    assert judge('echo "$(< README.md)"', ws, home)[0] == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "cat /dev/sda",
        "head -c 512 /dev/nvme0n1",
        "xxd /dev/mem",
        "strings /dev/sda1",
        "grep -a key /dev/sda",
        "cat < /dev/sda",
        "cat /dev/input/event0",
        "cat /dev/sd*",
        "echo $(< /dev/sda)",
    ],
)
def test_reading_a_device_needs_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt" and "device" in why, why


@pytest.mark.parametrize(
    "command",
    ["cat /dev/urandom", "cat /dev/null", "cat /dev/stdin", "ls -l /dev/sda", "ls /dev"],
)
def test_harmless_device_uses_stay_allowed(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "allow", why


@pytest.mark.parametrize(
    "command",
    ["PS_FORMAT=pid,environ ps", "export PS_FORMAT=environ; ps", "env PS_FORMAT=environ ps"],
)
def test_ps_default_format_from_the_environment(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt", why


@pytest.mark.parametrize(
    "command",
    [
        # tree-sitter splits `$a/$b/environ` in two words; bash reads one
        "a=/proc; b=1; cat $a/$b/environ",
        "cat $a/$b/environ",
        # what `..` climbs out of is only known at run time
        "cat ${PWD%/*}/../proc/1/environ",
        "cat $X/../../proc/1/environ",
        # POSIX character classes in a glob
        "cat /proc/[[:digit:]]*/environ",
        "cat /proc/1/[[:alpha:]]nviron",
    ],
)
def test_partly_known_words_that_may_name_process_state(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt" and "environment" in why, why


def test_touching_words_are_one_word(ws: Path) -> None:
    from codemode.sandbox.execpolicy.shell_parse import parse_script

    (cmd,) = parse_script('cat $a/$b/environ x"y"$z').commands
    assert [w.text for w in cmd.words] == ["cat", "$a/$b/environ", 'x"y"$z']


def test_long_partly_known_words_decide_quickly(ws: Path, home: Path) -> None:
    """Each prefix of a word with expansions is tried: a bound keeps that linear."""
    import time

    lines = [
        'cat "$x' + "".join(f"/q{i}$y" for i in range(1500)) + '"',
        "cat /" + "[" * 20000,
        "cat /" + "[[:" * 7000,
        "cat /" + "*/" * 1500 + "x",
    ]
    for line in lines:
        start = time.perf_counter()
        judge(line, ws, home)
        assert time.perf_counter() - start < 5, line[:30]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("grep -r password /etc", "prompt"),  # /etc/shadow is below
        ("find /etc -type f | xargs cat", "prompt"),
        ("grep -rn foo /etc/nginx", "allow"),
        ("cat /etc/hosts", "allow"),
        ('ls /etc && cat "$f"', "allow"),  # far above any secret: a variable is common
        ('ls /proc/1 && cat "$f"', "prompt"),  # right above them
    ],
)
def test_folders_above_system_secrets(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why
