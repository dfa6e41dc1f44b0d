"""Execpolicy: the decision for a whole shell command, from the rules and its simple commands.

Each simple command gets a verdict: ``allow``, ``prompt``, ``forbidden``, or ``unmatched``
when no rule covers it (the approval policy then decides: ``untrusted`` asks,
``on-request`` and ``never`` run it inside the sandbox). The strictest verdict over all
simple commands is the decision for the command line.

Layers: the built-in defaults (``default.rules`` plus the ``rm`` check below), the
user's rules (``~/.codemode/rules/*.rules`` and ``--rules`` files) and the repository's
(``.codemode/rules/*.rules``). For one simple command the user's and the repository's
matching rules always count; the defaults count only when none of the *user's* rules
matches it fully, so a user can relax a default (that is what "always allow" does), while
a repository can only add restrictions to the defaults.
"""

from __future__ import annotations

import functools
import os
import os.path
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from codemode.sandbox.rules import (
    PrefixRule,
    RuleSet,
    load_rules_dir,
    load_rules_file,
    parse_rules,
)
from codemode.sandbox.shell_parse import SimpleCommand, parse_script
from codemode.sandbox.words import Word

Verdict = Literal["allow", "unmatched", "prompt", "forbidden"]
STRICTNESS: dict[str, int] = {"allow": 0, "unmatched": 1, "prompt": 2, "forbidden": 3}
BUILTIN = "built-in"


def codemode_home() -> Path:
    """``$CODEMODE_HOME``, or ``~/.codemode``."""
    return Path(os.environ.get("CODEMODE_HOME") or Path.home() / ".codemode")


def user_rules_dir() -> Path:
    return codemode_home() / "rules"


def repo_rules_dirs(workspace: Path) -> list[Path]:
    """``.codemode/rules`` of the workspace and of the git repository containing it."""
    dirs = [workspace / ".codemode" / "rules"]
    for parent in [workspace, *workspace.parents]:
        if (parent / ".git").exists():
            if parent != workspace:
                dirs.append(parent / ".codemode" / "rules")
            break
    return dirs


@functools.cache
def default_rules() -> RuleSet:
    text = resources.files("codemode.sandbox").joinpath("default.rules").read_text("utf-8")
    return parse_rules(text, "<built-in default.rules>", "default")


@dataclass(frozen=True)
class PolicyContext:
    """Where the command runs, for the checks that depend on paths."""

    cwd: Path
    writable_roots: tuple[Path, ...]  # the workspace first
    home: Path = field(default_factory=Path.home)


@dataclass(frozen=True)
class CommandVerdict:
    """The verdict on one simple command (or on a part that could not be checked)."""

    command: str
    verdict: Verdict
    rule: str | None = None  # the rule as written, or "built-in: ..." for checks in code
    source: str | None = None  # "file:line" of the rule
    justification: str | None = None
    words: tuple[str, ...] = ()  # the command's literal words (for "always allow")

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "decision": self.verdict,
            "rule": self.rule,
            "source": self.source,
            "justification": self.justification,
        }


@dataclass(frozen=True)
class Evaluation:
    """The policy decision for one command line."""

    command: str
    decision: Verdict
    deciding: CommandVerdict | None
    verdicts: tuple[CommandVerdict, ...]

    def needing_approval(self) -> list[CommandVerdict]:
        return [v for v in self.verdicts if v.verdict in ("prompt", "unmatched")]

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "decision": self.decision,
            "deciding": self.deciding.to_json() if self.deciding else None,
            "commands": [v.to_json() for v in self.verdicts],
        }


class Policy:
    """The loaded rules of a session, ready to judge command lines."""

    def __init__(
        self,
        user: RuleSet | None = None,
        repo: RuleSet | None = None,
        defaults: RuleSet | None = None,
    ) -> None:
        self.defaults = defaults if defaults is not None else default_rules()
        self.user = user or RuleSet()
        self.repo = repo or RuleSet()

    @classmethod
    def load(
        cls,
        workspace: Path | None = None,
        *,
        extra_files: Iterable[Path] = (),
        user_dir: Path | None = None,
    ) -> Policy:
        """Built-in defaults, the user's rules, ``extra_files`` and the repository's rules.

        Raises RulesError (naming the file and line) for a file that does not load.
        """
        user = load_rules_dir(user_dir or user_rules_dir(), "user")
        for path in extra_files:
            user.extend(load_rules_file(Path(path), "user"))
        repo = RuleSet()
        if workspace is not None:
            for d in repo_rules_dirs(workspace):
                repo.extend(load_rules_dir(d, "repo"))
        return cls(user=user, repo=repo)

    def add_user_rule(self, rule: PrefixRule) -> None:
        self.user.rules.append(rule)

    @property
    def files(self) -> list[Path]:
        return [*self.user.files, *self.repo.files]

    def evaluate(self, command: str, ctx: PolicyContext) -> Evaluation:
        """Judge the shell command line ``command``."""
        parsed = parse_script(command)
        verdicts: list[CommandVerdict] = []
        for problem in parsed.problems:
            verdicts.append(
                CommandVerdict(
                    command=problem.source,
                    verdict="prompt",
                    rule=f"{BUILTIN}: {problem.reason}",
                    justification="a command that cannot be checked needs approval",
                )
            )
        cwds, cwd_unknown = _candidate_cwds(parsed.commands, ctx)
        for cmd in parsed.commands:
            v = self._judge(cmd, ctx, cwds, cwd_unknown)
            if v is not None:
                verdicts.append(v)
        if not verdicts:
            return Evaluation(command, "allow", None, ())
        deciding = max(verdicts, key=lambda v: STRICTNESS[v.verdict])
        return Evaluation(command, deciding.verdict, deciding, tuple(verdicts))

    def _judge(
        self, cmd: SimpleCommand, ctx: PolicyContext, cwds: list[Path], cwd_unknown: bool
    ) -> CommandVerdict | None:
        words = list(cmd.words)
        shown = cmd.display()
        literal_words = _literal_prefix(words)
        executables = {
            **self.defaults.executables,
            **self.repo.executables,
            **self.user.executables,
        }
        candidates: list[CommandVerdict] = []
        user_hit = False
        for layer in (self.user, self.repo):
            for rule in layer.rules:
                level = rule.match(words, open_ended=cmd.open_ended, executables=executables)
                if level == "no":
                    continue
                user_hit = user_hit or (rule.layer == "user" and level == "yes")
                candidates.append(_verdict_of(rule, level, shown, literal_words))
        if not user_hit:
            for rule in self.defaults.rules:
                level = rule.match(words, open_ended=cmd.open_ended, executables=executables)
                if level != "no":
                    candidates.append(_verdict_of(rule, level, shown, literal_words))
            rm = _rm_check(cmd, ctx, cwds, cwd_unknown, shown, literal_words)
            if rm is not None:
                candidates.append(rm)
        root = _rm_root_check(cmd, ctx, cwds, shown, literal_words)
        if root is not None:
            candidates.append(root)
        if cmd.strict_only:
            candidates = [c for c in candidates if c.verdict in ("prompt", "forbidden")]
            return max(candidates, key=lambda v: STRICTNESS[v.verdict]) if candidates else None
        if not candidates:
            return CommandVerdict(shown, "unmatched", words=literal_words)
        best = max(candidates, key=lambda v: STRICTNESS[v.verdict])
        if best.verdict == "allow" and cmd.writes:
            return CommandVerdict(
                shown,
                "unmatched",
                rule=best.rule,
                source=best.source,
                justification=f"writes to {', '.join(cmd.writes)} through a redirection",
                words=literal_words,
            )
        return best


def _literal_prefix(words: Sequence[Word]) -> tuple[str, ...]:
    """The command's words up to the first one only known at run time."""
    out = []
    for w in words:
        if not w.literal:
            break
        out.append(w.text)
    return tuple(out)


def _verdict_of(rule: PrefixRule, level: str, shown: str, words: tuple[str, ...]) -> CommandVerdict:
    verdict: Verdict = rule.decision
    justification = rule.justification
    if level == "maybe":
        if rule.decision == "allow":
            verdict = "unmatched"  # an allow needs certainty
        else:
            verdict = "prompt"
            justification = (
                "words only known at run time may make this match: " + (justification or "")
            ).rstrip(": ")
    return CommandVerdict(
        shown, verdict, rule.describe(short=True), rule.source, justification, words
    )


def _candidate_cwds(
    commands: Sequence[SimpleCommand], ctx: PolicyContext
) -> tuple[list[Path], bool]:
    """Every directory a relative path might be relative to, following ``cd``s."""
    cwds = [ctx.cwd]
    unknown = False
    for cmd in commands:
        if cmd.strict_only or not cmd.words or cmd.words[0].text not in ("cd", "pushd"):
            continue
        args = [w for w in cmd.words[1:] if not (w.literal and w.text.startswith("-"))]
        if not args:
            cwds.append(ctx.home)
        elif not args[0].literal:
            unknown = True
        else:
            cwds += [Path(os.path.normpath(c / args[0].text)) for c in cwds]
    return list(dict.fromkeys(cwds)), unknown


def _rm_parts(cmd: SimpleCommand) -> tuple[bool, list[Word]] | None:
    if cmd.strict_only or not cmd.words or not cmd.words[0].literal:
        return None
    if os.path.basename(cmd.words[0].text) != "rm":
        return None
    recursive = False
    targets: list[Word] = []
    options_done = False
    for w in cmd.words[1:]:
        if not options_done and w.literal and w.text == "--":
            options_done = True
        elif not options_done and w.literal and w.text.startswith("-") and w.text != "-":
            recursive = (
                recursive
                or w.text == "--recursive"
                or (not w.text.startswith("--") and any(c in "rR" for c in w.text[1:]))
            )
        else:
            targets.append(w)
    return recursive, targets


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def _static_path(word: Word) -> str | None:
    """For a literal word its text; for a glob the directory its matches lie in."""
    if word.kind == "literal":
        return word.text
    if word.kind == "glob":
        head = word.text
        for i, c in enumerate(head):
            if c in "*?[":
                head = head[:i]
                break
        return os.path.dirname(head) if "/" in head else "."
    return None


def _rm_check(
    cmd: SimpleCommand,
    ctx: PolicyContext,
    cwds: list[Path],
    cwd_unknown: bool,
    shown: str,
    words: tuple[str, ...],
) -> CommandVerdict | None:
    parts = _rm_parts(cmd)
    if parts is None:
        return None
    _, targets = parts
    rule = f"{BUILTIN}: rm outside the writable roots"
    why = "deletes files outside the workspace"
    if cmd.open_ended:
        return CommandVerdict(
            shown,
            "prompt",
            rule,
            None,
            "deletes paths only known at run time (xargs, find -exec)",
            words,
        )
    roots = [Path(os.path.realpath(r)) for r in ctx.writable_roots] + list(ctx.writable_roots)
    for t in targets:
        static = _static_path(t)
        if static is None:
            return CommandVerdict(
                shown,
                "prompt",
                rule,
                None,
                f"deletes {t.text}, a path only known at run time",
                words,
            )
        relative = not os.path.isabs(static)
        if relative and cwd_unknown:
            return CommandVerdict(
                shown,
                "prompt",
                rule,
                None,
                "deletes a relative path after a cd to a directory only known at run time",
                words,
            )
        for base in cwds if relative else [Path("/")]:
            p = Path(os.path.normpath(base / static))
            real = Path(os.path.realpath(p))
            if not (_inside(p, roots) and _inside(real, roots)):
                return CommandVerdict(shown, "prompt", rule, None, f"{why}: {p}", words)
    return None


def _rm_root_check(
    cmd: SimpleCommand,
    ctx: PolicyContext,
    cwds: list[Path],
    shown: str,
    words: tuple[str, ...],
) -> CommandVerdict | None:
    """``rm -r`` of ``/``, a top-level system directory or the home directory."""
    parts = _rm_parts(cmd)
    if parts is None or not parts[0]:
        return None
    for t in parts[1]:
        static = _static_path(t)
        if static is None:
            continue
        bases = cwds if not os.path.isabs(static) else [Path("/")]
        for base in bases:
            p = Path(os.path.normpath(base / static))
            if _inside(p, ctx.writable_roots) and p not in (Path("/"), ctx.home):
                continue
            whole = t.kind == "glob" and p in (Path("/"), ctx.home)
            if p == Path("/") or p == ctx.home or p.parent == Path("/") or whole:
                return CommandVerdict(
                    shown,
                    "forbidden",
                    f"{BUILTIN}: rm -r of /, a top-level directory or the home directory",
                    None,
                    f"would delete {p} and everything under it; do this yourself if you mean it",
                    words,
                )
    return None
