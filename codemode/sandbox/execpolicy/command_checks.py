"""Per-command checks of the execpolicy that are not rules: the safe-command table (with
the commands a program would run and the files it would write), and ``HARD_CHECKS``,
the ``verdicts.Check`` list no rule overrides (writes to devices, network redirections,
glob command names, deletes)."""

from __future__ import annotations

import fnmatch
import os.path
from pathlib import Path
from typing import TYPE_CHECKING

from codemode.sandbox.execpolicy import devices, rm_checks, safe_args, word_patterns
from codemode.sandbox.execpolicy.rules import TRUSTED_BIN_DIRS
from codemode.sandbox.execpolicy.script_types import MAX_DEPTH, SimpleCommand
from codemode.sandbox.execpolicy.verdicts import (
    CommandFacts,
    CommandVerdict,
    Evaluator,
    PolicyContext,
)
from codemode.sandbox.execpolicy.word_patterns import DYN

if TYPE_CHECKING:
    from codemode.sandbox.execpolicy.verdicts import Check

BUILTIN = "built-in"


def table_verdict(
    policy: Evaluator,
    cmd: SimpleCommand,
    ctx: PolicyContext,
    depth: int,
    executables: dict[str, tuple[str, ...]],
    hard: list[CommandVerdict],
    soft: list[CommandVerdict],
    words: tuple[str, ...],
) -> CommandVerdict | None:
    """The safe-command table's verdict; adds what it finds to ``hard`` / ``soft``."""
    name = cmd.words[0].text
    shown = cmd.display()
    base = os.path.basename(name)
    if not name.isascii() or not name.isprintable():
        hard.append(
            CommandVerdict(
                shown,
                "prompt",
                f"{BUILTIN}: unusual command name",
                None,
                f"the command name {name!r} has characters outside printable ASCII "
                "(a look-alike of another name?)",
                words,
            )
        )
        return None
    trusted = "/" not in name or (
        os.path.dirname(os.path.normpath(name)) in TRUSTED_BIN_DIRS
        or name in executables.get(base, ())
    )
    finding = safe_args.check(base, cmd.words[1:], open_ended=cmd.open_ended)
    rule = f"{BUILTIN}: safe_commands.toml [{base}]"
    for text, why in finding.payloads:
        if depth >= MAX_DEPTH:
            hard.append(CommandVerdict(shown, "prompt", rule, None, why, words))
            continue
        inner = policy.evaluate(text, ctx, depth=depth + 1)
        d = inner.deciding
        if inner.decision == "forbidden" and d is not None:
            hard.append(
                CommandVerdict(
                    shown,
                    "forbidden",
                    d.rule,
                    d.source,
                    f"{why}: `{d.command}` — {d.justification or 'forbidden'}",
                    words,
                )
            )
        else:
            hard.append(CommandVerdict(shown, "prompt", rule, None, f"{why}: `{text}`", words))
    for target, why in finding.outputs:
        dev = devices.device_target(target, [ctx.cwd])
        if dev is not None:
            hard.append(_device_verdict(shown, dev, words))
        elif not rm_checks.inside_roots(target, ctx):
            soft.append(
                CommandVerdict(shown, "prompt", rule, None, f"{why}, outside the workspace", words)
            )
        # a file inside the writable roots: like a redirection there, never `allow`
    if finding.level == "prompt":
        soft.append(CommandVerdict(shown, "prompt", rule, None, finding.reason, words))
    if finding.level == "unknown" or not trusted:
        if finding.level == "unknown":
            _device_args(cmd, shown, words, soft)
        return None
    if finding.level == "allow" and not finding.payloads and not finding.outputs:
        return CommandVerdict(
            shown,
            "allow",
            rule,
            None,
            "known to only read files or print information",
            words,
        )
    return None


def device_writes(f: CommandFacts) -> list[CommandVerdict]:
    """Forbidden verdicts for writes to devices: redirections, writers, disk tools."""
    cmd, cwds, shown, words, literals = f.cmd, f.cwds, f.shown, f.words, f.literals
    out = []
    targets = list(cmd.write_words)
    base = os.path.basename(cmd.words[0].text) if cmd.words and cmd.words[0].literal else ""
    args = list(cmd.words[1:])
    targets += devices.written_paths(base, args)
    targets = [r for t in targets for r in devices.resolve(t, literals)]
    for t in targets:
        dev = devices.device_target(t, cwds)
        if dev is not None:
            out.append(_device_verdict(shown, dev, words))
            return out
    if base and devices.is_disk_tool(base):
        for a in args:
            dev = devices.names_device(a, cwds)
            if dev is not None:
                out.append(_device_verdict(shown, dev, words))
                break
    for t in cmd.write_words:
        if not out and any(c in t.text for c in ("$(", "`", "<(")):
            out.append(
                CommandVerdict(
                    shown,
                    "prompt",
                    f"{BUILTIN}: writes to a file only known at run time",
                    None,
                    f"redirects output to {t.text}, a command's output (a device?)",
                    words,
                )
            )
    writer = base in devices.table()["writers"] or (base and devices.is_disk_tool(base))
    if not out and writer and (cmd.open_ended or base == "dd"):
        # xargs dd of=% / find -exec tee {}: what they write is only known at run time
        unknown = cmd.open_ended or any(not t.literal for t in devices.written_paths(base, args))
        if unknown:
            out.append(
                CommandVerdict(
                    shown,
                    "prompt",
                    f"{BUILTIN}: writes to files only known at run time",
                    None,
                    f"{base} writes to files only known at run time (a device?)",
                    words,
                )
            )
    return out


_NETWORK_DIRS = ("/dev/tcp", "/dev/udp")


def network_redirects(f: CommandFacts) -> list[CommandVerdict]:
    """A redirection to bash's ``/dev/tcp/HOST/PORT`` or ``/dev/udp/...`` opens a
    connection: even a read sends HOST (``$(whoami).example.com``) to a name server.
    Never ``allow``: whether it may connect is the approval policy's and the sandbox's
    network setting's to say (``unmatched``, like a write)."""
    cmd, shown, words, literals = f.cmd, f.shown, f.words, f.literals
    for w in (*cmd.reads, *cmd.write_words):
        for r in devices.resolve(w, literals):
            for tokens in word_patterns.forms(r):
                cuts = [i for i, t in enumerate(tokens) if t == ("c", "/") and i > 0]
                for cut in cuts:
                    head = tokens[:cut]
                    if DYN in head and word_patterns.known(head) < 4:
                        continue  # `< "$f"/x` names nothing in particular
                    rx = word_patterns.regex(head)
                    if any(rx.fullmatch(d) for d in _NETWORK_DIRS):
                        why = f"the redirection to {w.text} opens a network connection"
                        verdict = CommandVerdict(
                            shown, "unmatched", f"{BUILTIN}: network", None, why, words
                        )
                        return [verdict]
    return []


def _device_args(
    cmd: SimpleCommand, shown: str, words: tuple[str, ...], soft: list[CommandVerdict]
) -> None:
    for a in cmd.words[1:]:
        dev = devices.names_device(a)
        if dev is not None:
            soft.append(
                CommandVerdict(
                    shown,
                    "prompt",
                    f"{BUILTIN}: device argument",
                    None,
                    f"hands the device {dev} to a program not known to be read-only",
                    words,
                )
            )
            return


def glob_name(f: CommandFacts) -> list[CommandVerdict]:
    """A command name that is a glob (``/sbin/mkfs.e*``) and may expand to a program a
    rule forbids whatever its arguments: forbidden."""
    cmd, shown, words = f.cmd, f.shown, f.words
    if not cmd.words or cmd.words[0].kind != "glob":
        return []
    pattern = os.path.basename(cmd.words[0].text)
    for layer in f.layers:
        for rule in layer.rules:
            if rule.decision != "forbidden" or len(rule.pattern) != 1 or rule.any_argument:
                continue
            hit = next(
                (a for a in rule.pattern[0] if fnmatch.fnmatchcase(os.path.basename(a), pattern)),
                None,
            )
            if hit is not None:
                why = f"{cmd.words[0].text} may run {hit}: {rule.justification or 'forbidden'}"
                described = rule.describe(short=True)
                return [CommandVerdict(shown, "forbidden", described, rule.source, why, words)]
    return []


# The checks every simple command goes through, in this order (the first of the
# strictest verdicts decides): what no rule can allow. ``Policy._judge`` runs them.
HARD_CHECKS: tuple[Check, ...] = (
    device_writes,
    network_redirects,
    glob_name,
    rm_checks.rm_root_by_glob,
    rm_checks.rm_root_check,
    rm_checks.rm_check,
)


def _device_verdict(shown: str, dev: str, words: tuple[str, ...]) -> CommandVerdict:
    return CommandVerdict(
        shown,
        "forbidden",
        f"{BUILTIN}: writes to a device",
        None,
        f"writes to {dev}; writing to a disk or the machine's devices is never done "
        "for you — run it yourself if you mean it",
        words,
    )


def git_elsewhere(cwds: list[Path], unknown: bool, ctx: PolicyContext) -> bool:
    """Whether git may run in a repository other than the workspace's own, whose
    protected ``.git`` keeps its config from naming programs: after a ``cd`` (into a
    repository the model made, with ``core.fsmonitor=CMD`` in its config, which even
    ``git status`` runs), or in a workspace without ``.git`` that looks like a bare
    repository (``HEAD``, ``objects/``, ``refs/``, ``config`` written there).
    ``git -C DIR``/``--git-dir``/``--work-tree`` are kept from ``allow`` by ``unwrap``."""
    if unknown or any(c != ctx.cwd for c in cwds):
        return True
    return not (ctx.cwd / ".git").exists() and (ctx.cwd / "HEAD").exists()
