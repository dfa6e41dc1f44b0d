"""Execpolicy: the decision for a whole shell command, from the rules and its simple commands.

Each simple command gets a verdict: ``allow``, ``prompt``, ``forbidden``, or ``unmatched``
when nothing says it is safe (the approval policy then decides: ``untrusted`` asks,
``on-request`` and ``never`` run it inside the sandbox). The strictest verdict over all
simple commands, and over the problems found while parsing (``prompt``), is the decision.

``allow`` needs certainty: the program is in the safe-command table
(``safe_commands.toml``) and every option and argument passes its check, or one of the
user's own rules allows it. Layers:

- built-in: ``default.rules`` (prompt / forbidden rules), the safe-command table, and
  checks in code (device writes, ``rm``, commands that a program would run);
- the user's rules (``~/.codemode/rules/*.rules``, ``[sandbox] rules``, ``--rules``): may
  allow. A user ``allow`` overrides a built-in ``prompt`` rule, never a ``forbidden``
  one, never a command that a program would run, a variable that changes what runs, or
  a delete outside the writable roots; ``allow_command`` (one exact command line, what
  "always" stores) overrides everything but ``forbidden``;
- the repository's rules (``.codemode/rules`` in the workspace and every folder up to
  the repository root): can only tighten; an ``allow``, ``allow_command`` or
  ``host_executable`` there is ignored with a notice.
"""

from __future__ import annotations

import functools
import os
import os.path
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

# Re-exported: the one expansion of paths from the environment (``user_dirs``).
from codemode.locations.user_dirs import codemode_home as codemode_home
from codemode.sandbox.execpolicy import command_checks, program_source, rm_checks, secret_reads
from codemode.sandbox.execpolicy.rules import ExactRule, PrefixRule, RuleSet
from codemode.sandbox.execpolicy.rules_file import load_rules_dir, load_rules_file, parse_rules
from codemode.sandbox.execpolicy.shell_parse import SimpleCommand, parse_script

# Re-exported: the verdict types live in a leaf module the per-command checks share.
from codemode.sandbox.execpolicy.verdicts import STRICTNESS as STRICTNESS
from codemode.sandbox.execpolicy.verdicts import CommandFacts
from codemode.sandbox.execpolicy.verdicts import CommandVerdict as CommandVerdict
from codemode.sandbox.execpolicy.verdicts import Evaluation as Evaluation
from codemode.sandbox.execpolicy.verdicts import PolicyContext as PolicyContext
from codemode.sandbox.execpolicy.verdicts import Verdict as Verdict
from codemode.sandbox.execpolicy.words import Word

BUILTIN = "built-in"


def user_rules_dir() -> Path:
    return codemode_home() / "rules"


def repo_rules_dirs(workspace: Path) -> list[Path]:
    """``.codemode/rules`` of the workspace and of every folder up to the root of the git
    repository containing it (just the workspace's when it is in none)."""
    chain = [workspace, *workspace.parents]
    top = next((i for i, p in enumerate(chain) if (p / ".git").exists()), 0)
    return [p / ".codemode" / "rules" for p in chain[: top + 1]]


@functools.cache
def default_rules() -> RuleSet:
    resource = resources.files("codemode.sandbox.execpolicy").joinpath("default.rules")
    text = resource.read_text("utf-8")
    return parse_rules(text, "<built-in default.rules>", "default")


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
        self.notices: list[str] = []
        self.repo = self._tighten_only(repo or RuleSet())

    def _tighten_only(self, repo: RuleSet) -> RuleSet:
        """The repository's rules without what would loosen the policy (with notices)."""
        kept = RuleSet(files=list(repo.files))
        for rule in repo.rules:
            if rule.decision == "allow":
                self.notices.append(
                    f"{rule.source}: ignored {rule.describe(short=True)}: a repository's "
                    "rules can only add restrictions"
                )
            else:
                kept.rules.append(rule)
        for exact in repo.exact:
            self.notices.append(
                f"{exact.source}: ignored {exact.describe()}: a repository's rules can only "
                "add restrictions"
            )
        for name, paths in repo.executables.items():
            self.notices.append(
                f"ignored host_executable(name={name!r}) in a repository's rules "
                f"({', '.join(paths)}): only your own rules may name executables"
            )
        return kept

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
        mine = (user_dir or user_rules_dir()).resolve()
        if workspace is not None:
            for d in repo_rules_dirs(workspace):
                if d.resolve() != mine:
                    repo.extend(load_rules_dir(d, "repo"))
        return cls(user=user, repo=repo)

    def add_user_rule(self, rule: PrefixRule | ExactRule) -> None:
        if isinstance(rule, ExactRule):
            self.user.exact.append(rule)
        else:
            self.user.rules.append(rule)

    @property
    def files(self) -> list[Path]:
        return [*self.user.files, *self.repo.files]

    def evaluate(self, command: str, ctx: PolicyContext, *, depth: int = 0) -> Evaluation:
        """Judge the shell command line ``command``."""
        parsed = parse_script(command, depth=depth)
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
        cwds, cwd_unknown = rm_checks.candidate_cwds(parsed.commands, ctx)
        verdicts += secret_reads.check(
            parsed.commands, cwds, cwd_unknown, parsed.literals, ctx.home
        )
        for cmd in parsed.commands:
            v = self._judge(cmd, ctx, cwds, cwd_unknown, depth, parsed.literals)
            if v is not None:
                verdicts.append(v)
        deciding = max(verdicts, key=lambda v: STRICTNESS[v.verdict]) if verdicts else None
        decision: Verdict = deciding.verdict if deciding else "allow"
        exact = self._exact(command) if depth == 0 and decision != "forbidden" else None
        if exact is not None and decision != "allow":
            shown = CommandVerdict(
                command.strip(),
                "allow",
                exact.describe(),
                exact.source,
                "you allowed this exact command line",
            )
            return Evaluation(command, "allow", shown, tuple(verdicts))
        return Evaluation(command, decision, deciding, tuple(verdicts))

    def _exact(self, command: str) -> ExactRule | None:
        line = command.strip()
        return next((r for r in self.user.exact if r.command == line), None)

    def _judge(
        self,
        cmd: SimpleCommand,
        ctx: PolicyContext,
        cwds: list[Path],
        cwd_unknown: bool,
        depth: int,
        literals: dict[str, set[str]],
    ) -> CommandVerdict | None:
        words = list(cmd.words)
        shown = cmd.display()
        literal_words = _literal_prefix(words)
        executables = {**self.defaults.executables, **self.user.executables}
        hard: list[CommandVerdict] = []  # forbidden, and prompts no prefix allow overrides
        soft: list[CommandVerdict] = []  # built-in prompts a user allow rule overrides
        user_allow: CommandVerdict | None = None
        name = words[0] if words else None
        key = os.path.basename(name.text) if name is not None and name.literal else None
        for layer in (self.user, self.repo, self.defaults):
            for rule in _rules_for(layer, key):
                level = rule.match(words, open_ended=cmd.open_ended, executables=executables)
                if level == "no":
                    continue
                v = _verdict_of(rule, level, shown, literal_words)
                if rule.decision == "allow":
                    if v.verdict == "allow" and rule.layer == "user" and user_allow is None:
                        user_allow = v
                elif v.verdict == "forbidden" or rule.layer != "default":
                    hard.append(v)
                else:
                    soft.append(v)
        facts = CommandFacts(
            cmd, ctx, cwds, cwd_unknown, literals, (self.user, self.repo, self.defaults),
            shown, literal_words,
        )  # fmt: skip
        for check in command_checks.HARD_CHECKS:
            hard += check(facts)
        table_allow: CommandVerdict | None = None
        if not cmd.strict_only and words and words[0].literal:
            table_allow = command_checks.table_verdict(
                self, cmd, ctx, depth, executables, hard, soft, literal_words
            )
        if table_allow is not None and key == "git":
            if command_checks.git_elsewhere(cwds, cwd_unknown, ctx):
                table_allow = None  # its config may name a program: the approval decides
        candidates = hard + soft
        if cmd.strict_only:
            return max(candidates, key=_rank) if candidates else None
        if hard:
            best = max(hard, key=_rank)
        elif user_allow is not None:
            best = user_allow
        elif soft:
            best = max(soft, key=_rank)
        elif table_allow is not None:
            best = table_allow
        else:
            return CommandVerdict(shown, "unmatched", words=literal_words)
        if best.verdict == "allow" and name is not None and name.literal:
            # the program the name leads to must be the one an allow means
            why = program_source.allow_problem(name.text, ctx)
            if why is not None:
                return CommandVerdict(
                    shown,
                    "prompt",
                    f"{BUILTIN}: the program a name runs",
                    None,
                    why,
                    literal_words,
                )
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


def _rules_for(layer: RuleSet, name: str | None) -> list[PrefixRule]:
    """The rules of ``layer`` whose first token can match a command named ``name`` (all
    of them for a name only known at run time)."""
    return layer.rules if name is None else layer.rules_named(name)


def _rank(v: CommandVerdict) -> int:
    return STRICTNESS[v.verdict]


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
