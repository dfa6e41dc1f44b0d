"""Finding skills: ``.agents/skills/`` in the repository and ``~/.agents/skills/``.

A skill is a folder holding ``SKILL.md``: YAML front matter with ``name`` and
``description``, then a Markdown body of instructions. Only names and descriptions are
shown to the model up front; the body (and any ``.js`` helpers in the folder) are read
when the model asks for them. A malformed ``SKILL.md`` becomes a ``SkillProblem`` naming
the file and what is wrong, and the other skills still load.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from codemode.locations import small_files
from codemode.locations.repository import repository_root

SKILL_FILE = "SKILL.md"
SKILLS_DIR = Path(".agents") / "skills"
NAME_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
# Folders inside a skill that never hold helpers worth offering.
_SKIP_DIRS = {"node_modules", ".git"}
# How deep below a skill's folder its helpers are looked for.
_MAX_HELPER_DEPTH = 16
# A repository's skills lie in the workspace, where a command can fill a folder with
# millions of entries; each is read at every session's start and listed to the model.
# Entries read of one skills folder, and of one skill's folders in all (for helpers):
MAX_ENTRIES_READ = 2_000
# Skills listed to the model, and helpers offered of one skill (names in its prompt).
MAX_SKILLS = 128
MAX_HELPERS = 128
# Front matter is YAML, whose parser costs far more than its bytes (8 KiB of ``[a,a,...]``
# is 150 ms in PyYAML's Python loader): bytes of one skill's front matter (its name and
# description fit many times over), and of every skill's in one discovery. A skill past
# either is a problem, not a skill.
MAX_FRONT_MATTER = 8 << 10
MAX_FRONT_MATTER_ALL = 256 << 10
# Bytes of a SKILL.md read to find its front matter (the body is read when asked for).
_HEAD = MAX_FRONT_MATTER + (1 << 10)

Scope = Literal["repo", "user"]


@dataclass(frozen=True)
class Skill:
    """A skill found on disk; the body is read on demand, not at discovery."""

    name: str
    description: str
    directory: Path
    scope: Scope
    # Helper name (path inside the skill folder, without ".js") -> file.
    helpers: dict[str, Path] = field(default_factory=dict)

    @property
    def skill_file(self) -> Path:
        return self.directory / SKILL_FILE

    def body(self) -> str:
        """The instructions after the front matter."""
        text = small_files.read_text(self.skill_file, errors="replace")
        return split_front_matter(text)[1].strip()


@dataclass(frozen=True)
class SkillProblem:
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class SkillSet:
    skills: list[Skill] = field(default_factory=list)
    problems: list[SkillProblem] = field(default_factory=list)
    # Directories searched, in order, with their scope.
    searched: list[tuple[Path, Scope]] = field(default_factory=list)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


class FrontMatterError(ValueError):
    pass


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter, body). The front matter is the block between a first line ``---``
    and the next line ``---``; None when the file does not start with one."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise FrontMatterError("front matter starts with --- but never ends (no closing --- line)")


def parse_skill_file(path: Path, budget: list[int] | None = None) -> tuple[str, str]:
    """(name, description) from ``path``; raises FrontMatterError saying what is wrong.
    ``budget``: bytes of front matter still to be parsed in this discovery (taken from)."""
    import yaml  # lazy: PyYAML, only for a skill file

    raw = small_files.read_bytes(path, _HEAD, truncate=True)
    cut = len(raw) == _HEAD
    if cut:  # (a character cut at the end is no UTF-8 error)
        raw = raw[: raw.rfind(b"\n") + 1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrontMatterError("not UTF-8 text") from None
    try:
        front, _ = split_front_matter(text)
    except FrontMatterError:
        if not cut:
            raise
        raise FrontMatterError(f"front matter is over {MAX_FRONT_MATTER} bytes") from None
    if front is None:
        raise FrontMatterError("no front matter: the file must start with a --- line")
    size = len(front.encode())
    if size > MAX_FRONT_MATTER:
        raise FrontMatterError(f"front matter is over {MAX_FRONT_MATTER} bytes")
    if budget is not None:
        if size > budget[0]:
            raise FrontMatterError(
                f"not read: the skills found before it had {MAX_FRONT_MATTER_ALL} bytes of "
                "front matter in all (the most read at a session's start)"
            )
        budget[0] -= size
    # libyaml's loader where PyYAML has it: several times faster, and it refuses deep
    # nesting itself, where the Python loader recurses until RecursionError.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(front, Loader=loader)
    except RecursionError:
        raise FrontMatterError("front matter is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise FrontMatterError(f"front matter is not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise FrontMatterError("front matter must be a mapping with name and description")
    name, description = data.get("name"), data.get("description")
    if name is None:
        raise FrontMatterError('missing "name" in the front matter')
    if not isinstance(name, str) or not NAME_PATTERN.match(name) or len(name) > MAX_NAME:
        raise FrontMatterError(
            f'"name" must be lowercase letters, digits and hyphens, at most {MAX_NAME} '
            f"characters; got {name!r}"
        )
    if description is None:
        raise FrontMatterError('missing "description" in the front matter')
    if not isinstance(description, str) or not description.strip():
        raise FrontMatterError('"description" must be a non-empty string')
    if len(description) > MAX_DESCRIPTION:
        raise FrontMatterError(
            f'"description" is {len(description)} characters, over {MAX_DESCRIPTION}'
        )
    return name, " ".join(description.split())


def find_helpers(directory: Path) -> dict[str, Path]:
    """``.js`` files in a skill folder, named by their path without the extension: at
    most ``MAX_HELPERS``, found among ``MAX_ENTRIES_READ`` entries."""
    helpers: dict[str, Path] = {}
    # A loop, not ``os.walk`` (which recurses once per level in Python 3.11), and only
    # ``_MAX_HELPER_DEPTH`` levels down: a repository's skills lie in the workspace,
    # where a command can leave a chain of folders thousands deep, walked at the start
    # of the next session.
    stack: list[tuple[str, str, int]] = [(str(directory), "", 0)]  # path, relative, depth
    left = MAX_ENTRIES_READ
    while stack and left > 0 and len(helpers) < MAX_HELPERS:
        top, rel, depth = stack.pop()
        try:
            with os.scandir(top) as listing:
                entries = sorted(itertools.islice(listing, left), key=lambda e: e.name)
        except OSError:
            continue  # as os.walk: an unreadable folder is passed over
        left -= len(entries)
        below: list[tuple[str, str, int]] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # (as os.walk: a link to a folder is not entered)
            except OSError:
                is_dir = False
            if is_dir:
                wanted = entry.name not in _SKIP_DIRS and not entry.name.startswith(".")
                if wanted and not entry.is_symlink() and depth < _MAX_HELPER_DEPTH:
                    below.append((entry.path, f"{rel}{entry.name}/", depth + 1))
            elif entry.name.endswith(".js") and len(helpers) < MAX_HELPERS:
                helpers[rel + Path(entry.name).with_suffix("").name] = Path(entry.path)
        stack.extend(reversed(below))
    return helpers


def user_skills_dir() -> Path:
    """``~/.agents/skills`` (``$HOME`` decides where ``~`` is)."""
    return Path.home() / SKILLS_DIR


def repo_skills_dirs(cwd: Path) -> list[Path]:
    """``.agents/skills`` in each directory from the repository root down to ``cwd``,
    outermost first (a subproject may add its own)."""
    cwd = cwd.resolve()
    root = repository_root(cwd) or cwd
    chain = [cwd, *cwd.parents]
    return [d / SKILLS_DIR for d in reversed(chain[: chain.index(root) + 1])]


def discover_skills(cwd: Path, *, user_dir: Path | None = None) -> SkillSet:
    """Every skill visible from ``cwd``. A repository skill hides a user skill of the
    same name (the repository knows its own conventions better)."""
    found = SkillSet()
    places: list[tuple[Path, Scope]] = [(user_dir or user_skills_dir(), "user")]
    places += [(d, "repo") for d in repo_skills_dirs(cwd)]
    by_name: dict[str, Skill] = {}
    # Front matter bytes left to parse; the user's skills come first, so a repository's
    # flood cannot crowd them out.
    budget = [MAX_FRONT_MATTER_ALL]
    for base, scope in places:
        found.searched.append((base, scope))
        if not base.is_dir():
            continue
        try:
            with os.scandir(base) as listing:
                entries = sorted(
                    (Path(e.path) for e in itertools.islice(listing, MAX_ENTRIES_READ + 1)),
                    key=lambda p: p.name,
                )
        except OSError as exc:
            found.problems.append(SkillProblem(base, exc.strerror or str(exc)))
            continue
        if len(entries) > MAX_ENTRIES_READ:
            del entries[MAX_ENTRIES_READ:]
            found.problems.append(
                SkillProblem(
                    base,
                    f"more than {MAX_ENTRIES_READ} entries: only that many were read, "
                    "so some skills here may be missing",
                )
            )
        for entry in entries:
            skill_file = entry / SKILL_FILE
            if not entry.is_dir() or not skill_file.is_file():
                continue
            try:
                name, description = parse_skill_file(skill_file, budget)
            except (FrontMatterError, OSError) as exc:
                found.problems.append(SkillProblem(skill_file, str(exc)))
                continue
            by_name[name] = Skill(name, description, entry, scope, find_helpers(entry))
    found.skills = sorted(by_name.values(), key=lambda s: s.name)
    if len(found.skills) > MAX_SKILLS:
        # (each is a line of the model's instructions at every turn)
        left_out = [s.name for s in found.skills[MAX_SKILLS:]]
        found.skills = found.skills[:MAX_SKILLS]
        found.problems.append(
            SkillProblem(
                places[-1][0],
                f"more than {MAX_SKILLS} skills: {len(left_out)} not listed to the model "
                f"({', '.join(left_out[:5])}{', ...' if len(left_out) > 5 else ''})",
            )
        )
    return found
