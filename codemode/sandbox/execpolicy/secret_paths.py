"""What a path may name: a secret, a folder above secrets, or nothing of concern.

Secrets are other processes' state under ``/proc`` (their environment, where the agent's
API keys live, their memory, open files, and their root and working directories, which
reach past the sandbox's mounts) and credential files (``~/.ssh/id_*``, ``~/.netrc``,
``/etc/shadow``...): the data in ``secret_paths.toml``. A word only partly known
(``/proc/$PID/environ``, ``/proc/[0-9]*/environ``) is read as a pattern
(``word_patterns``) and tried against sample paths of each kind. ``secret_reads`` turns
what a command's words name into verdicts.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import os.path
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from codemode.sandbox.execpolicy.word_patterns import DYN, Token, forms, known, path_parts, regex
from codemode.sandbox.execpolicy.words import Word

WHY_PROC = (
    "a process's environment, memory, open files or root directory (secrets such as "
    "API keys, or files outside the sandbox)"
)
WHY_CREDENTIALS = "a credential file (private keys, tokens, passwords)"
# Expansions with fewer known characters than this around them name nothing in
# particular (`cat "$f"`): only the approval policy can judge those.
_MIN_KNOWN = 4
_MAX_LINKS = 16
# Components a pattern is tried to: a secret path has fewer (and a home folder's depth)
_MAX_CUTS = 32


@dataclass(frozen=True)
class Hit:
    kind: str  # "sensitive", or "ancestor": a directory above secrets
    path: str  # as shown
    why: str


@dataclass(frozen=True)
class _Table:
    home_secrets: tuple[str, ...]
    system_secrets: tuple[str, ...]
    not_secrets: tuple[str, ...]
    fills: tuple[str, ...]
    process_entries: frozenset[str]
    own_fds: frozenset[str]
    machine_files: frozenset[str]
    tree_readers: frozenset[str]
    metadata_only: frozenset[str]
    probes: tuple[str, ...]  # sensitive sample paths
    ancestors: tuple[str, ...]  # directories above them


@functools.cache
def load_table() -> _Table:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("secret_paths.toml")
    text = resource.read_text("utf-8")
    d = tomllib.loads(text)
    pids = d["probe_pids"]
    probes = [f"/proc/{m}" for m in d["machine_files"]]
    ancestors = ["/", "/proc"]
    for p in pids:
        ancestors += [f"/proc/{p}", f"/proc/{p}/task", f"/proc/{p}/task/{p}"]
        for e in d["probe_entries"]:
            probes += [f"/proc/{p}/{e}", f"/proc/{p}/task/{p}/{e}"]
    return _Table(
        home_secrets=tuple(d["home_secrets"]),
        system_secrets=tuple(s.lstrip("/") for s in d["system_secrets"]),
        not_secrets=tuple(d["not_secrets"]),
        fills=tuple(d["probe_fills"]),
        process_entries=frozenset(d["process_entries"]),
        own_fds=frozenset(d["own_fds"]),
        machine_files=frozenset(d["machine_files"]),
        tree_readers=frozenset(d["tree_readers"]),
        metadata_only=frozenset(d["metadata_only"]),
        probes=tuple(probes),
        ancestors=tuple(ancestors),
    )


def _proc_kind(parts: list[str]) -> str | None:
    """For the components of an absolute path below /proc."""
    table = load_table()
    if not parts:
        return "ancestor"
    pid = parts[0]
    if not (pid.isdigit() or pid in ("self", "thread-self")):
        return "sensitive" if pid in table.machine_files else None
    rest = parts[1:]
    if len(rest) >= 1 and rest[0] == "task":
        if len(rest) <= 2:
            return "ancestor"
        rest = rest[2:]
    if not rest:
        return "ancestor"
    entry = rest[0]
    if entry == "fd" and pid in ("self", "thread-self") and len(rest) == 2:
        return None if rest[1] in table.own_fds else "sensitive"
    if ".." in rest:
        return "sensitive"  # through a link (cwd/.., root/..): wherever it leads
    return None if entry in table.process_entries else "sensitive"


@functools.cache
def _split_globs(
    globs: tuple[str, ...],
) -> tuple[frozenset[str] | None, tuple[tuple[str, ...], ...]]:
    """The globs as components, and the first components they can match (None: any)."""
    split = tuple(tuple(g.split("/")) for g in globs)
    heads = {g[0] for g in split}
    literal = all(not any(c in h for c in "*?[") for h in heads)
    return (frozenset(heads) if literal else None), split


def _credential_kind(parts: list[str], globs: tuple[str, ...]) -> str | None:
    """For the components of a path below a directory that ``globs`` are relative to."""
    heads, split = _split_globs(globs)
    if parts and heads is not None and parts[0] not in heads:
        return None  # the common case, cheaply
    found: str | None = None
    for gparts in split:
        shared = min(len(parts), len(gparts))
        if not all(fnmatch.fnmatchcase(parts[i], gparts[i]) for i in range(shared)):
            continue
        if len(parts) < len(gparts):
            found = "ancestor"
        elif not any(fnmatch.fnmatchcase(parts[-1], n) for n in load_table().not_secrets):
            return "sensitive"
    return found


def _literal_kind(path: str, homes: Sequence[str]) -> Hit | None:
    if not path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        return Hit("ancestor", path, WHY_PROC)
    if parts[0] == "proc":
        kind = _proc_kind(parts[1:])
        return Hit(kind, path, WHY_PROC) if kind else None
    best: Hit | None = None
    for home in homes:
        hparts = [p for p in home.split("/") if p]
        if parts[: len(hparts)] == hparts:
            kind = _credential_kind(parts[len(hparts) :], load_table().home_secrets) or (
                "ancestor" if len(parts) == len(hparts) else None
            )
            if kind == "sensitive":
                return Hit(kind, path, WHY_CREDENTIALS)
            best = best or (Hit(kind, path, WHY_CREDENTIALS) if kind else None)
    kind = _credential_kind(parts, load_table().system_secrets)
    if kind == "sensitive" or (kind and best is None):
        return Hit(kind, path, WHY_CREDENTIALS)
    return best


@functools.cache
def _samples(homes: tuple[str, ...]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Sensitive sample paths (with why) and the directories above them."""
    table = load_table()
    probes = [(p, WHY_PROC) for p in table.probes]
    ancestors = list(table.ancestors)
    bases = [*(h.rstrip("/") for h in homes), ""]
    for base in bases:
        globs = table.home_secrets if base else table.system_secrets
        for g in globs:
            for fill in table.fills:
                probes.append((f"{base}/{g.replace('*', fill)}", WHY_CREDENTIALS))
            gparts = g.split("/")
            ancestors += [base + "/" + "/".join(gparts[:i]) for i in range(len(gparts))]
    return tuple(probes), tuple(dict.fromkeys(a.rstrip("/") or "/" for a in ancestors))


@functools.lru_cache(maxsize=4096)
def _may_lead(lead: str, homes: tuple[str, ...]) -> bool:
    """Whether a path starting with ``lead`` may be a sensitive sample path."""
    return any(p.startswith(lead) or lead.startswith(p) for p, _ in _samples(homes)[0])


def _pattern_kind(
    tokens: list[Token], shown: str, homes: tuple[str, ...], given: int = 0
) -> Hit | None:
    """``tokens[:given]`` is the directory a relative word was taken from: only the
    characters the word itself fixes say what an expansion in it may name."""
    probes, ancestors = _samples(homes)
    up = [
        i
        for i in range(len(tokens) - 2)
        if tokens[i : i + 3] == [("c", "/"), ("c", "."), ("c", ".")]
    ]
    if up:
        # `${PWD%/*}/../proc/1/environ`, `/*/../proc/...`: where `..` leads from a name
        # only known at run time could be anywhere
        tokens = [DYN, *tokens[up[-1] + 3 :]]
        given = 0
    lead = "".join(t[1] for t in itertools.takewhile(lambda t: t[0] == "c", tokens))
    if not _may_lead(lead, homes):
        return None  # `/usr/share/*.txt` can be none of them
    dynamic = DYN in tokens
    cuts = [i for i, t in enumerate(tokens) if t == ("c", "/") and i > 0] + [len(tokens)]
    if len(cuts) > _MAX_CUTS:
        if dynamic:  # each prefix may be any path: too many to try
            return Hit("sensitive", shown, "a path too long to check, partly known at run time")
        cuts = cuts[:_MAX_CUTS]  # without expansions a secret is only so deep
    for cut in cuts:
        head = tokens[:cut]
        if dynamic and known(head[given:]) < _MIN_KNOWN:
            continue
        rx = regex(head)
        why = next((why for p, why in probes if rx.fullmatch(p)), None)
        if why is not None:
            return Hit("sensitive", shown, why)
    while len(tokens) > 1 and tokens[-1] == ("c", "/"):
        tokens = tokens[:-1]
    if dynamic and known(tokens[given:]) < _MIN_KNOWN:
        return None
    rx = regex(tokens)
    hit = any(rx.fullmatch(a) for a in ancestors)
    return Hit("ancestor", shown, WHY_PROC) if hit else None


def _forms(path: str, links: dict[str, str | None]) -> list[str]:
    """``path`` as written, normalized, and through each symbolic link on the way (a link
    in the workspace to ``/proc/1/root``: the final target alone would say ``/etc/x``)."""
    forms = [path, os.path.normpath(path)]
    todo = [path] if len(path) < 4096 else []
    while todo and len(forms) < _MAX_LINKS:
        current = todo.pop()
        parts = current.split("/")
        for n in range(2, len(parts) + 1):
            prefix = "/".join(parts[:n])
            if prefix == "/proc" or prefix.startswith("/proc/"):
                break  # its links say what they mean to this process, not the command
            if prefix not in links:
                try:
                    links[prefix] = os.readlink(prefix)
                except (OSError, ValueError):
                    links[prefix] = None
            target = links[prefix]
            if target is None:
                continue
            rest = "/".join(parts[n:])
            joined = os.path.join(os.path.dirname(prefix), target, rest).rstrip("/")
            forms.append(joined)
            todo.append(joined)
            break
    return forms


def all_homes(homes: tuple[str, ...]) -> tuple[str, ...]:
    """``homes`` and this process's own home folder."""
    return tuple(dict.fromkeys((_own_home(os.environ.get("HOME")), *homes)))


@functools.lru_cache(maxsize=8)
def _own_home(env_home: str | None) -> str:
    """What this process expands ``~`` to (``$HOME``, else the password database)."""
    return os.path.expanduser("~")


def path_kind(
    word: Word,
    cwds: Sequence[Path],
    cwd_unknown: bool,
    homes: Sequence[Path] = (),
    links: dict[str, str | None] | None = None,
) -> Hit | None:
    """What ``word`` may name: a secret (``sensitive``), a directory above secrets
    (``ancestor``), or nothing of concern (None). Relative words are taken from each
    directory the command may run in; ``homes``: the home directories besides this
    process's own (``~`` was expanded with it); ``links``: what the links on the way
    were found to point to (shared by the checks of one line)."""
    home_set = all_homes(tuple(str(h) for h in homes))
    links = {} if links is None else links
    if word.literal and not cwd_unknown:
        return _literal_word(word.text, cwds, home_set, links)
    worst: Hit | None = None
    for tokens in forms(word):
        for part in path_parts(tokens):
            if not part or part[0] == ("c", "-"):
                continue  # an option; what it names after `=` or `/` is its own part
            bases: list[list[Token]] = [[]]
            if part[0] != ("c", "/"):
                # `$HOME/x` may be absolute already; `x` is relative to each directory
                bases = [[]] if part[0] == DYN else []
                bases += [[("c", c) for c in f"{d}/"] for d in cwds]
                if cwd_unknown:
                    bases.append([DYN, ("c", "/")])
            for base in bases:
                full = base + part
                if all(t[0] == "c" for t in full):
                    text = "".join(t[1] for t in full)
                    hits = [h for f in _forms(text, links) if (h := _literal_kind(f, home_set))]
                else:
                    h = _pattern_kind(full, word.text, home_set, len(base))
                    hits = [h] if h else []
                for hit in hits:
                    if hit.kind == "sensitive":
                        return hit
                    worst = worst or hit
    return worst


def _literal_word(
    text: str, cwds: Sequence[Path], homes: tuple[str, ...], links: dict[str, str | None]
) -> Hit | None:
    """``path_kind`` of a word fixed by its text (the common case, without patterns)."""
    parts = [text]
    if "=" in text:
        parts.append(text.partition("=")[2])  # --file=PATH
    if text.startswith("-") and "/" in text:
        parts.append(text[text.index("/") :])  # -fPATH
    worst: Hit | None = None
    for part in parts:
        if not part or part.startswith("-"):
            continue
        paths = [part] if part.startswith("/") else [f"{d}/{part}" for d in cwds]
        for path in paths:
            for form in _forms(path, links):
                hit = _literal_kind(form, homes)
                if hit is not None and hit.kind == "sensitive":
                    return hit
                worst = worst or hit
    return worst
