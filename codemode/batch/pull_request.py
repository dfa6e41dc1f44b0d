"""Opening a pull request (GitHub's ``gh``) or merge request (GitLab's ``glab``) for a
branch that ``--push`` pushed (``--pull-request``).

Run by the driver on the host, in the repository, after the push and before the
working copy is changed: a failure is the repository's failure, and ``publish``
then deletes the branch it pushed (a request opened for a branch that is deleted
afterwards, when a later step fails, is closed by the service). The tool is chosen by
the push remote's URL (a host naming GitLab: ``glab``; otherwise ``gh``), or whichever
of the two is installed; it uses its own login (``gh auth login``, ``glab auth
login``, or their token variables) and never prompts.

Written against the tools' documented command lines (``gh pr create --head --base
--title --body``, ``glab mr create --source-branch --target-branch --title
--description --yes``) and tested with stand-ins that record their arguments: not
against the real services.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from codemode.locations import launcher
from codemode.locations.host_programs import host_program

TOOLS = ("gh", "glab")
_URL = re.compile(r"https?://\S+")


class PullRequestError(RuntimeError):
    """No pull request could be opened."""


def installed() -> list[str]:
    """The request tools on PATH, ``gh`` first."""
    return [name for name in TOOLS if host_program(name) is not None]


def _choose(remote_url: str) -> str:
    have = installed()
    if not have:
        raise PullRequestError("--pull-request needs gh (GitHub) or glab (GitLab) on PATH")
    host = remote_url.split("@")[-1].split("//")[-1].split("/")[0].split(":")[0]
    wanted = "glab" if "gitlab" in host.lower() else "gh"
    return wanted if wanted in have else have[0]


def open_pull_request(
    repo: Path, remote_url: str, branch: str, base: str, message: str
) -> str:
    """Open a request to merge ``branch`` into ``base``, titled with the first line of
    ``message`` (the rest is its description); returns its URL (or what the tool said)."""
    tool = _choose(remote_url)
    title, _, body = message.strip().partition("\n")
    body = body.strip() or f"Made by a codemode batch run (branch {branch})."
    if tool == "glab":
        argv = ["glab", "mr", "create", "--source-branch", branch, "--target-branch", base,
                "--title", title, "--description", body, "--yes"]  # fmt: skip
    else:
        argv = ["gh", "pr", "create", "--head", branch, "--base", base, "--title", title,
                "--body", body]  # fmt: skip
    from codemode.sandbox.git.git_overrides import safe_config_env
    from codemode.sandbox.git.repo_config import clean_env

    # The tool runs git in the repository itself (gh pr create: `git status`, which may
    # rewrite the index and so run a post-index-change hook): that git gets codemode's
    # overrides (no hook, no fsmonitor...) and no GIT_* variable from outside, as
    # codemode's own git does.
    env = {**clean_env(), **safe_config_env(), "GH_PROMPT_DISABLED": "1", "NO_PROMPT": "1"}
    try:
        # (its arguments are a title and a description: data, not programs)
        proc = launcher.run(argv, cwd=repo, stdin=subprocess.DEVNULL, capture_output=True,
                            env=env, timeout=300, names_files=False)
    except (OSError, subprocess.TimeoutExpired, launcher.LaunchRefused) as exc:
        raise PullRequestError(f"{' '.join(argv[:3])}: {exc}") from None
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        said = (proc.stderr.decode(errors="replace") or out).strip().splitlines()
        reason = said[-1] if said else f"exit status {proc.returncode}"
        raise PullRequestError(f"{' '.join(argv[:3])}: {reason}")
    urls = _URL.findall(out)
    lines = out.strip().splitlines()
    return urls[-1] if urls else (lines[-1] if lines else "")
