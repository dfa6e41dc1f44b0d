"""Reads of secrets: other processes' state under ``/proc`` (their environment, where the
agent's API keys live, their memory, open files, and their root and working directories,
which reach past the sandbox's mounts) and credential files (``~/.ssh/id_*``,
``~/.netrc``, ``/etc/shadow``...). Any command naming such a path (as an argument, an
option's value, a redirection, through a glob, a variable, a link or a ``cd``) needs
approval; so does a program that may read a whole tree (``grep -r``, ``tar``) given
``/``, ``/proc``, a process directory or the home folder. The paths are data:
``secret_paths.toml``, and what a word may name is ``secret_paths``' to say.
"""

from __future__ import annotations

import os.path
from collections.abc import Sequence
from pathlib import Path

from codemode.sandbox.execpolicy import devices
from codemode.sandbox.execpolicy.script_types import SimpleCommand
from codemode.sandbox.execpolicy.secret_paths import Hit, all_homes, load_table, path_kind
from codemode.sandbox.execpolicy.verdicts import CommandVerdict
from codemode.sandbox.execpolicy.words import Word

RULE = "built-in: reads secrets"
WHY_DEVICE = "a device (a disk, memory, a keyboard: everything on it, past file permissions)"
# Folders under /dev that hold ordinary files.
_DEV_FILES = ("/dev/shm/", "/dev/mqueue/", "/dev/hugepages/")
ANY_SECRET = "credential files or a process's environment, memory and open files"
_READERS = frozenset({"read", "mapfile", "readarray"})
_EXEC_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _reads_trees(cmd: SimpleCommand) -> bool:
    """Whether the command may read the files below a directory it is given."""
    if not cmd.words or not cmd.words[0].literal:
        return True
    name = os.path.basename(cmd.words[0].text)
    if name == "find":
        return any(w.text in _EXEC_ACTIONS or not w.literal for w in cmd.words[1:])
    return name in load_table().tree_readers


def _runs_on_names(commands: Sequence[SimpleCommand], shallow: bool) -> bool:
    """Whether a command of the line gets names at run time: from xargs or find -exec,
    a ``read`` loop, a command's output (or, below a directory deeper than ``/`` or the
    home folder, any expansion)."""
    for c in commands:
        if c.open_ended or (c.words and c.words[0].text in _READERS):
            return True
        for w in c.words:
            if w.kind == "dynamic" and (not shallow or "$(" in w.text or "`" in w.text):
                return True
    return False


def check(
    commands: Sequence[SimpleCommand],
    cwds: Sequence[Path],
    cwd_unknown: bool,
    literals: dict[str, set[str]],
    home: Path | None = None,
) -> list[CommandVerdict]:
    """Prompt verdicts for the commands of one command line that may read secrets:
    another process's state, credential files."""
    homes = (home,) if home is not None else ()
    memo: dict[Word, Hit | None] = {}  # wrappers repeat their command's words
    links: dict[str, str | None] = {}

    def judged(w: Word) -> Hit | None:
        if w not in memo:
            memo[w] = next(
                (
                    h
                    for r in devices.resolve(w, literals)
                    if (h := path_kind(r, cwds, cwd_unknown, homes, links) or _device(r, cwds))
                ),
                None,
            )
        return memo[w]

    out: list[CommandVerdict] = []
    listed: list[tuple[SimpleCommand, Hit]] = []
    # the commands that run first: a wrapper's own words (`env -C /proc/1 cat environ`)
    # name the same paths, less clearly
    for cmd in sorted(commands, key=lambda c: c.strict_only):
        shown = cmd.display()
        # a command's name is only a path when it has a slash (else PATH is searched)
        named = cmd.words[:1] if cmd.words and "/" in cmd.words[0].text else ()
        words = [*named, *cmd.words[1:], *cmd.write_words, *cmd.reads]
        for w in words:
            hit = judged(w)
            if hit is None:
                continue
            if hit.why == WHY_DEVICE and _metadata_only(cmd):
                continue
            if hit.kind == "sensitive":
                why = f"names {hit.path}: {hit.why}"
                out.append(CommandVerdict(shown, "prompt", RULE, None, why))
                break
            if _reads_trees(cmd) or w in cmd.reads:
                why = f"may read everything below {hit.path}, including {ANY_SECRET}"
                out.append(CommandVerdict(shown, "prompt", RULE, None, why))
                break
            listed.append((cmd, hit))
    if listed and not out:
        shallow = all(_shallow(h.path, homes) for _, h in listed)
        if _runs_on_names(commands, shallow):
            cmd, hit = listed[0]
            why = (
                f"lists {hit.path} and runs a command on names only known at run time, "
                f"which may read {ANY_SECRET}"
            )
            out.append(CommandVerdict(cmd.display(), "prompt", RULE, None, why))
    return out


def _metadata_only(cmd: SimpleCommand) -> bool:
    """Whether the command only looks at what its arguments are, never inside them."""
    if not cmd.words or not cmd.words[0].literal:
        return False
    name = os.path.basename(cmd.words[0].text)
    if name == "find":
        return not _reads_trees(cmd)
    return name in load_table().metadata_only


def _device(word: Word, cwds: Sequence[Path]) -> Hit | None:
    """A disk, memory or input device (reads of devices; writes are ``devices``')."""
    dev = devices.names_device(word, cwds)
    if dev is None or not dev.startswith("/dev/") or dev.startswith(_DEV_FILES):
        return None
    return Hit("sensitive", dev, WHY_DEVICE)


def _shallow(path: str, homes: Sequence[Path]) -> bool:
    """A folder far above any secret (``/``, ``/etc``, the home folder itself), where
    listing and then reading names from a variable is common and rarely reaches one."""
    p = os.path.normpath(path) if path.startswith("/") else path
    if p == "/proc" or p.startswith("/proc/"):
        return False
    home_set = all_homes(tuple(str(h) for h in homes))
    return not any(p.startswith(h.rstrip("/") + "/") for h in home_set)
