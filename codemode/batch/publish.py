"""Publishing a repository's changes: a branch, a commit, and optionally a push (and a
pull request: ``pull_request.py``).

Done by the host's own git in the driver, after the run succeeded and never inside the
sandbox. Git is started through the launcher (never one a command planted), only in a
repository whose config names no program (``sandbox.git.repo_config``: every setting of
the repository's own files must be a known inert one, which holds for keys git adds
later too), with no ``GIT_*`` variable from outside, and with hooks, fsmonitor, signing,
pagers and helpers turned off on the command line as well. The commit is built
from the journal's bytes with plumbing (``hash-object --no-filters``, a private index,
``commit-tree``), so no clean/smudge filter, hook or other config-driven program runs.
Files git ignores are applied to the working copy but left out of the commit. Order:
the commit and the branch ref first (the working copy untouched), then the push and
the pull request, then the journal is applied to the working copy and HEAD moves to
the new branch. A failure at any step removes the branch (and a branch already pushed),
so the repository is left on its own branch exactly as it was.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codemode.batch import changes
from codemode.batch.applying import apply
from codemode.batch.changes import Change
from codemode.batch.push_target import is_local as _is_local
from codemode.batch.push_target import reaches_this_machine
from codemode.hostfs.fingerprint import of_bytes
from codemode.locations import launcher
from codemode.sandbox.git.git_overrides import SAFE_GIT
from codemode.sandbox.git.repo_config import RepoConfigRefused, clean_env
from codemode.sandbox.git.repo_config import check as check_config
from codemode.tools.store import publish_marker

# A push whose receive-pack runs on this machine (a local path, a file:// URL, ssh to
# this machine: ``push_target.py``) gets these overrides on receive-pack's own command
# line: git passes no `-c` setting to it, and the target repository's config (its hooks,
# its own core.hooksPath, an updateInstead checkout with its filters) is the
# repository's to choose.
LOCAL_RECEIVE_PACK = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c receive.autogc=false"
    " -c receive.denyCurrentBranch=refuse -c core.alternateRefsCommand= receive-pack"
)


@dataclass(frozen=True)
class PublishOptions:
    branch: str
    message: str
    author: str | None = None  # "Name <email>"; None: git's configured identity
    push: str | None = None  # a remote name or URL
    pull_request: bool = False  # after the push, open a pull/merge request (gh, glab)


@dataclass
class Published:
    branch: str
    commit: str
    pushed: bool
    pull_request: str | None = None  # its URL


class PublishError(RuntimeError):
    """Committing or pushing failed; the repository is as it was."""


_AUTHOR = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>]*)>\s*$")


def parse_author(author: str) -> tuple[str, str]:
    """``Name <email>`` as (name, email); ValueError if it is not that shape."""
    match = _AUTHOR.match(author)
    if match is None:
        raise ValueError(f"--author {author!r}: expected 'Name <email>'")
    return match["name"], match["email"]


def _git(repo: Path, *args: str, env: dict[str, str] | None = None, data: bytes = b"") -> str:
    full_env = clean_env()
    full_env.update(env or {})
    try:
        # (git's arguments are refs, paths and messages: data, not programs)
        proc = launcher.run([*SAFE_GIT, *args], cwd=repo, input=data, capture_output=True,
                            env=full_env, timeout=300, names_files=False)
    except (launcher.LaunchRefused, OSError, subprocess.TimeoutExpired) as exc:
        raise PublishError(f"git {args[0]}: {exc}") from None
    if proc.returncode != 0:
        from codemode.terminal.control_chars import visible

        message = visible(proc.stderr.decode(errors="replace")).strip().splitlines()
        raise PublishError(f"git {args[0]}: {message[-1] if message else 'failed'}")
    return proc.stdout.decode(errors="replace").strip()


def publish(repo: Path, journal: list[Change], options: PublishOptions) -> Published:
    """Commit ``journal`` on a new branch, push it if asked, then apply it to the
    working copy and switch to the branch. Raises PublishError (nothing changed) or
    ``changes.ApplyError`` (a journal ``changes.check`` refuses: before anything)."""
    if not (repo / ".git").exists():
        raise PublishError("not a git repository: --branch needs one")
    try:
        check_config(repo)
    except RepoConfigRefused as exc:
        raise PublishError(str(exc)) from None
    # before a commit or a push carries what apply would refuse
    changes.check(repo, journal)
    ref = f"refs/heads/{options.branch}"
    _git(repo, "check-ref-format", ref)
    head = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    try:
        current = _git(repo, "symbolic-ref", "-q", "HEAD")
    except PublishError:
        raise PublishError("HEAD is detached: --branch starts from a branch") from None
    env = _identity(options.author)
    commit = _commit(repo, journal, head, options.message, env)
    # Until HEAD and the index are the branch's, a kill leaves this marker for the next
    # start to finish the publish or undo it (``tools/store/publish_marker.py``).
    publish_marker.begin(repo, ref=ref, commit=commit, start_ref=current, push=options.push,
                         paths=[_states(c) for c in journal if c.kind not in ("mkdir", "rmdir")])
    try:
        _git(repo, "update-ref", ref, commit, "")  # "": the branch must not exist yet
    except BaseException:
        publish_marker.end(repo)
        raise
    pushed = False
    request: str | None = None
    try:
        if options.push:
            _git(repo, *_push(repo, options.push), f"{ref}:{ref}")
            pushed = True
            if options.pull_request:
                request = _pull_request(repo, options, current.removeprefix("refs/heads/"))
        apply(repo, journal)
    except BaseException:
        _undo(repo, ref, options.push if pushed else None)
        publish_marker.end(repo)
        raise
    try:
        _git(repo, "symbolic-ref", "HEAD", ref)
        _git(repo, "reset", "-q", "--no-refresh")  # the index as the new branch has it
    except PublishError:
        _git(repo, "symbolic-ref", "HEAD", current)
        raise  # (the marker stays: the next start finishes it, the files being applied)
    publish_marker.end(repo)
    return Published(options.branch, commit, pushed, request)


def _states(change: Change) -> tuple[str, str | None, str | None]:
    """The path, what it holds before the publish and after (``hostfs.fingerprint``)."""
    if change.kind == "deleted":
        return change.path, change.base, None
    return change.path, change.base, of_bytes(change.data, change.kind == "symlink")


def _push(repo: Path, remote: str) -> list[str]:
    """``git push`` to ``remote``, a local target's receive-pack overridden as well."""
    try:
        urls = _git(repo, "remote", "get-url", "--push", "--all", remote).splitlines()
    except PublishError:
        urls = [remote]  # no remote of that name: a URL or path, as git takes it
    args = ["push", "--no-verify", "--porcelain"]
    # Any one here is enough: a network URL beside it then refuses that command, and
    # the push fails (nothing of the target's runs).
    if any(_is_local(url) or reaches_this_machine(url) for url in urls):
        args.append(f"--receive-pack={LOCAL_RECEIVE_PACK}")
    return [*args, remote]


def _pull_request(repo: Path, options: PublishOptions, base: str) -> str:
    from codemode.batch.pull_request import PullRequestError, open_pull_request

    assert options.push is not None
    try:
        url = _git(repo, "remote", "get-url", options.push)
    except PublishError:
        url = options.push  # a URL given as it is
    try:
        return open_pull_request(repo, url, options.branch, base, options.message)
    except PullRequestError as exc:
        from codemode.terminal.control_chars import visible

        raise PublishError(visible(str(exc))) from None


def _identity(author: str | None) -> dict[str, str]:
    if author is None:
        return {}
    name, email = parse_author(author)
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _ignored(repo: Path, paths: list[str]) -> set[str]:
    """The paths git ignores (.gitignore and the like; tracked files never are)."""
    if not paths:
        return set()
    try:
        proc = launcher.run(
            [*SAFE_GIT, "check-ignore", "--stdin", "-z"], cwd=repo, capture_output=True,
            input="\0".join(paths).encode() + b"\0", env=clean_env(), timeout=300,
            names_files=False,
        )  # fmt: skip
    except (launcher.LaunchRefused, OSError, subprocess.TimeoutExpired) as exc:
        raise PublishError(f"git check-ignore: {exc}") from None
    if proc.returncode not in (0, 1):  # 1: none of them is ignored
        raise PublishError("git check-ignore: " + proc.stderr.decode(errors="replace").strip())
    return {p for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p}


def _commit(repo: Path, journal: list[Change], head: str, message: str, env: dict[str, str]) -> str:
    entries = [c for c in journal if c.kind in ("file", "symlink", "deleted")]
    # What a command made that git ignores (build output, node_modules) reaches the
    # working copy but not the commit, as `git add -A` would leave it out.
    ignored = _ignored(repo, [c.path for c in entries if c.kind != "deleted"])
    entries = [c for c in entries if c.path not in ignored]
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="codemode-publish-") as tmp:
        for change in entries:
            if change.kind == "deleted":
                lines.append(f"0 {'0' * len(head)}\t{change.path}")
                continue
            blob = _git(repo, "hash-object", "-w", "--no-filters", "--stdin", data=change.data)
            mode = "120000" if change.kind == "symlink" else (
                "100755" if change.executable else "100644"
            )
            lines.append(f"{mode} {blob}\t{change.path}")
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(repo, "read-tree", head, env=index)
        # NUL-separated: a path may hold a newline, which would start an entry of the
        # script's choosing (any blob, a removal) in the commit but not in the files.
        _git(repo, "update-index", "-z", "--index-info", env=index,
             data=b"".join(os.fsencode(line) + b"\0" for line in lines))  # fmt: skip
        tree = _git(repo, "write-tree", env=index)
    return _git(repo, "commit-tree", tree, "-p", head, "-m", message, env=env)


def _undo(repo: Path, ref: str, pushed_to: str | None) -> None:
    try:
        if pushed_to:
            _git(repo, *_push(repo, pushed_to), f":{ref}")
    except PublishError:
        pass
    finally:
        try:
            _git(repo, "update-ref", "-d", ref)
        except PublishError:
            pass
