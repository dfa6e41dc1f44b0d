"""`interpreter run --repos`, attacked from the side of what it runs over: the batch
program (confined JS, or a shell it is let run), the repositories being changed (their
files, modes, links, git config and hooks), and a driver killed at the worst moment.

Each test drives the real entry point over real repositories. Those marked "held" found
nothing to fix and stay as regression tests; "fixed" ones failed before the fix named
in their docstring; the ``xfail(strict=True)`` one is a gap documented in docs/batch.md.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_batch import interp, read_report
from test_batch_changes import git, make_repo


def _run(tmp_path: Path, script: str, *args: str | Path, env: dict[str, str] | None = None,
         timeout: float = 180) -> subprocess.CompletedProcess[str]:  # fmt: skip
    (tmp_path / "s.js").write_text(script)
    return interp("run", "s.js", *args, "--report", "r.jsonl", cwd=tmp_path, env=env,
                  timeout=timeout)  # fmt: skip


# --- host-side writes -----------------------------------------------------------------


def test_a_rewritten_setuid_file_loses_its_setuid_and_setgid_bits(tmp_path: Path) -> None:
    """Fixed (applying.py, workcopy.py): a repository file with the setuid bit, rewritten
    by the script, came back setuid with the script's bytes, owned by the user running
    the batch: the program's content as a setuid-them (or setuid-root) binary. The kernel
    drops both bits when anyone writes to such a file; the apply now does the same."""
    repo = make_repo(tmp_path / "repos" / "r", {"tool": "echo hi\n", "lib": "x\n"})
    (repo / "tool").chmod(0o4755)
    (repo / "lib").chmod(0o2755)
    done = _run(tmp_path, 'await tools.write_file({path: "tool", content: "echo pwned\\n"});\n'
                'await tools.write_file({path: "lib", content: "y\\n"});\n', "--repos", repo)
    assert done.returncode == 0, done.stderr
    assert (repo / "tool").read_text() == "echo pwned\n"
    for name in ("tool", "lib"):
        mode = stat.S_IMODE((repo / name).stat().st_mode)
        assert mode == 0o755, (name, oct(mode))  # still executable, no longer set-id


def test_a_folder_swapped_for_a_link_during_the_run_is_not_written_through(
    tmp_path: Path,
) -> None:
    """Held: while the script runs, the repository's ``sub/`` is replaced by a symlink to
    a folder outside (here by the script's own unconfined shell, standing in for another
    local user). The apply refuses the link instead of writing into the folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = make_repo(tmp_path / "repos" / "r", {"sub/a.txt": "a\n"})
    script = (
        f'await tools.shell({{command: "rm -rf {repo}/sub && ln -s {outside} {repo}/sub"}});\n'
        'await tools.write_file({path: "sub/planted.txt", content: "planted"});\n'
    )
    done = _run(tmp_path, script, "--repos", repo, "--sandbox", "danger-full-access",
                "--approval", "never")  # fmt: skip
    # The journal is taken against the repository as it is when the script ends: the
    # link is one of its entries, removed before the folder and file are put back.
    assert done.returncode in (0, 1), done.stderr
    assert os.listdir(outside) == []
    assert not (repo / "sub").is_symlink() or not (repo / "sub" / "planted.txt").exists()


def test_a_hard_link_to_a_file_outside_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Held: a repository file that is a hard link to a file outside it (the same inode)
    is replaced by a new file; the outside file keeps its bytes."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    repo = make_repo(tmp_path / "repos" / "r", {"keep.txt": "k\n"})
    os.link(outside, repo / "h.txt")
    done = _run(tmp_path, 'await tools.write_file({path: "h.txt", content: "new\\n"});\n',
                "--repos", repo)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (repo / "h.txt").read_text() == "new\n"
    assert outside.read_text() == "secret\n" and outside.stat().st_nlink == 1


# --- git the host runs --------------------------------------------------------------


def _hook(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho \"$0\" >> {marker}\nexit 0\n")
    path.chmod(0o755)


def test_a_local_push_target_the_repository_names_runs_none_of_its_hooks(
    tmp_path: Path,
) -> None:
    """Fixed (publish.py): the repository's ``remote.origin.url`` names a bare repository
    inside its own working tree, with hooks (and a ``core.hooksPath`` of its own). A push
    to a local path runs ``git receive-pack`` there, which ran those hooks on the host:
    the ``-c`` overrides of codemode's git do not reach it (git clears them for a local
    transport). Now its receive-pack gets them on its own command line."""
    marker = tmp_path / "hook-ran"
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    remote = repo / "vendor" / "evil.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    for name in ("pre-receive", "update", "post-receive", "post-update",
                 "reference-transaction"):  # fmt: skip
        _hook(remote / "hooks" / name, marker)
        _hook(repo / "vendor" / "more-hooks" / name, marker)
    git(remote, "config", "core.hooksPath", str(repo / "vendor" / "more-hooks"))
    git(repo, "remote", "add", "origin", "vendor/evil.git")
    done = _run(tmp_path, 'await tools.write_file({path: "v.txt", content: "2\\n"});\n',
                "--repos", repo, "--branch", "b", "--commit-message", "m", "--author",
                "Bot <bot@example.com>", "--push", "origin")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["pushed"] is True and git(remote, "rev-parse", "b") == line["commit"]


def test_local_push_targets_are_told_apart_as_git_tells_them() -> None:
    """The rule the fix above relies on (git's transport.c and connect.c): a path, with
    a slash before any colon, or a ``file://`` URL, is pushed to by a local receive-pack."""
    from codemode.batch.publish import _is_local

    local = ["vendor/x.git", "/srv/x.git", "x", "file:///srv/x", "./a://b", "../x:y"]
    remote = ["git@host:x.git", "host:x/y", "ssh://h/x", "https://h/x", "ext::sh -c id"]
    assert [u for u in local if not _is_local(u)] == []
    assert [u for u in remote if _is_local(u)] == []


def test_a_program_named_by_an_included_or_gitfile_config_never_runs(tmp_path: Path) -> None:
    """Held: a config that names a program (``core.fsmonitor``), reached through
    ``include.path`` to a file in the working tree, or through a ``.git`` file pointing
    at a git directory elsewhere, refuses that repository's publish before git runs."""
    marker = tmp_path / "program-ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    included = make_repo(tmp_path / "repos" / "inc", {"v.txt": "1\n", "cfg": ""})
    (included / "cfg").write_text(f"[core]\n\tfsmonitor = {evil}\n")
    git(included, "config", "include.path", "../cfg")
    pointed = make_repo(tmp_path / "repos" / "ptr", {"v.txt": "1\n"})
    gitdir = tmp_path / "elsewhere.git"
    (pointed / ".git").rename(gitdir)
    (pointed / ".git").write_text(f"gitdir: {gitdir}\n")
    subprocess.run(["git", "--git-dir", str(gitdir), "config", "core.sshCommand", str(evil)],
                   check=True)  # fmt: skip
    done = _run(tmp_path, 'await tools.write_file({path: "v.txt", content: "2\\n"});\n',
                "--repos", "repos", "--branch", "b", "--commit-message", "m",
                "--author", "Bot <bot@example.com>")  # fmt: skip
    assert done.returncode == 1, done.stderr
    report = read_report(tmp_path / "r.jsonl")
    assert "core.fsmonitor" in report["inc"]["error"], report["inc"]
    assert "core.sshcommand" in report["ptr"]["error"].lower(), report["ptr"]
    for name in ("inc", "ptr"):
        assert report[name]["error_kind"] == "publish"
        assert (tmp_path / "repos" / name / "v.txt").read_text() == "1\n"
    assert not marker.exists()


FAKE_GH = """#!/bin/sh
# Stands in for gh pr create, which asks git for uncommitted changes (git status).
git status --porcelain >/dev/null 2>&1
echo https://forge.example/pull/1
"""


def test_the_pull_request_tool_runs_git_with_no_repository_hook(tmp_path: Path) -> None:
    """Fixed (pull_request.py): ``gh pr create`` runs git in the repository itself (its
    ``git status`` counts uncommitted changes), and that git had neither codemode's
    ``-c`` overrides nor a clean environment: a stat-dirty index is rewritten and the
    repository's ``post-index-change`` hook ran on the host. The tool now runs with the
    same overrides, passed in GIT_CONFIG_COUNT variables that reach every git it starts."""
    marker = tmp_path / "hook-ran"
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n", "w.txt": "w\n"})
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    git(repo, "remote", "add", "origin", str(remote))
    _hook(repo / ".git" / "hooks" / "post-index-change", marker)
    os.utime(repo / "w.txt", (2_000_000_000, 2_000_000_000))  # newer than the index
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = _run(tmp_path, 'await tools.write_file({path: "v.txt", content: "2\\n"});\n',
                "--repos", repo, "--branch", "b", "--commit-message", "m", "--author",
                "Bot <bot@example.com>", "--push", "origin", "--pull-request", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert read_report(tmp_path / "r.jsonl")["r"]["pull_request"] == "https://forge.example/pull/1"
    assert not marker.exists(), marker.read_text()


# --- resources ----------------------------------------------------------------------


def test_a_deep_tree_a_script_made_leaves_no_scratch_copy(tmp_path: Path) -> None:
    """Fixed (scratch.py): a script that makes a folder 1500 levels deep in its copy
    made ``shutil.rmtree`` (recursive on Python 3.11) raise RecursionError in the
    worker's remover thread, past ``ignore_errors``: the thread died, and that copy and
    every later one stayed in the temporary folder."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    script = ('await tools.shell({command: "mkdir -p $(printf \'d/%.0s\' $(seq 1500))"});\n'
              'throw new Error("made it");\n')  # fmt: skip
    try:
        done = _run(tmp_path, script, "--repos", repo, env={**os.environ, "TMPDIR": str(temp)})
        assert done.returncode == 1 and "made it" in done.stderr, done.stderr
        assert [n for n in os.listdir(temp) if n.startswith("codemode-batch-")] == []
    finally:  # what is left would break pytest's own clean-up (its rmtree recurses too)
        subprocess.run(["rm", "-rf", "--", str(temp)], check=True)
    assert sorted(os.listdir(repo)) == [".git", "v.txt"]


def test_an_enormous_change_fails_its_repository_instead_of_filling_memory(
    tmp_path: Path,
) -> None:
    """Fixed (changes.py): the journal carries every changed file's bytes from the
    worker to the driver, in memory; a script that wrote a 3 GiB (sparse: no disk) file
    made the worker read, pickle and send it all, and the driver hold it. Now a journal
    over ``changes.JOURNAL_BYTES`` fails its repository before anything is read."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    done = _run(tmp_path, 'await tools.shell({command: "truncate -s 3G big.bin"});\n',
                "--repos", repo)  # fmt: skip
    assert done.returncode == 1, done.stderr
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["status"] == "failed" and "too large" in line["error"], line
    assert not (repo / "big.bin").exists()


# --- the terminal ---------------------------------------------------------------------


def test_escape_sequences_in_names_output_and_errors_are_shown_not_obeyed(
    tmp_path: Path,
) -> None:
    """Held: a repository folder, a file the script wrote, its console output and its
    error all hold escape sequences (window title, screen clear, OSC 52): none reaches
    stderr raw, with -v either."""
    name = "r\x1b]0;owned\x07\x1b[2J"
    make_repo(tmp_path / "repos" / name, {"v.txt": "1\n"})
    script = ('await tools.shell({command: "touch \\"$(printf \'f\\\\033[31m.txt\')\\""});\n'
              'console.log("out \\u001b]52;c;cHduZWQ=\\u0007");\n'
              'throw new Error("bad \\u001b[2J\\u009b31m");\n')  # fmt: skip
    done = _run(tmp_path, script, "--repos", "repos", "-v")
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr and "\x9b" not in done.stderr
    assert "^[]0;owned^G" in done.stderr and "bad ^[[2J" in done.stderr


# --- a driver killed ------------------------------------------------------------------

KILLED_PUBLISH = r"""
import os, signal, sys
from pathlib import Path
from codemode.batch import publish
from codemode.batch.changes import Change, fingerprint

repo, where = Path(sys.argv[1]), sys.argv[2]
real_git, real_apply = publish._git, publish.apply

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def dying_git(at, *args, **kwargs):
    if where == "before-head" and args[:2] == ("symbolic-ref", "HEAD") and len(args) == 3:
        die()  # applied, HEAD not yet moved
    if where == "before-index" and args[:1] == ("reset",):
        die()  # HEAD moved, the index still the old branch's
    return real_git(at, *args, **kwargs)

def dying_apply(*args, **kwargs):
    if where == "before-apply":
        die()  # the branch made, nothing applied
    return real_apply(*args, **kwargs)

publish._git, publish.apply = dying_git, dying_apply
changes = [Change("v.txt", "file", b"2\n", base=fingerprint(repo / "v.txt")),
           Change("new.txt", "file", b"new\n"),
           Change("old.txt", "deleted", base=fingerprint(repo / "old.txt"))]
options = publish.PublishOptions(branch="b", message="m", author="Bot <bot@example.com>")
publish.publish(repo, changes, options)
"""


@pytest.mark.parametrize(("where", "after"), [
    ("before-apply", False), ("before-head", True), ("before-index", True)])
def test_a_publish_killed_partway_is_finished_or_undone_at_the_next_start(
    tmp_path: Path, where: str, after: bool
) -> None:
    """Fixed (tools/store/publish_marker.py): a driver killed after the apply and before
    HEAD moved left the old branch checked out with the changes applied (and the branch
    made); killed before the apply, a branch that blocked the next run with the same
    --branch. Now the next start finishes it (the changes are in place) or undoes it
    (they are not): the whole before or the whole after, and a clean status."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n", "old.txt": "old\n"})
    killed = subprocess.run([sys.executable, "-c", KILLED_PUBLISH, str(repo), where],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    done = _run(tmp_path, "return 1;\n", "--repos", repo)  # the next start
    assert done.returncode == 0, done.stderr
    assert "interrupted" in done.stderr, done.stderr
    head = git(repo, "symbolic-ref", "--short", "HEAD")
    files = sorted(p.name for p in repo.iterdir() if p.name != ".git")
    state = (head, (repo / "v.txt").read_text(), files, git(repo, "branch", "--list", "b"))
    if after:
        assert state == ("b", "2\n", ["new.txt", "v.txt"], "* b"), state
    else:
        assert state == ("main", "1\n", ["old.txt", "v.txt"], ""), state
    assert git(repo, "status", "--porcelain") == ""
    done = _run(tmp_path, "return 1;\n", "--repos", repo)  # nothing more to say
    assert "interrupted" not in done.stderr, done.stderr


def test_a_huge_file_the_script_removes_fails_its_repository_instead_of_filling_memory(
    tmp_path: Path,
) -> None:
    """Fixed (applying.py): to put a file back, the journal keeps what it replaces or
    removes, read whole into the driver's memory; a script that deleted (or emptied) a
    50 GB file had the host read all of it. Now that is bounded as new bytes are
    (``changes.JOURNAL_BYTES``): the repository fails, nothing applied, nothing read."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    with open(repo / "big.bin", "wb") as f:
        f.truncate(3 << 29)  # 1.5 GiB, sparse: no disk
    done = _run(tmp_path, 'await tools.shell({command: "rm big.bin"});\n', "--repos", repo)
    assert done.returncode == 1, done.stderr
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["status"] == "failed" and "too much to keep" in line["error"], line
    assert (repo / "big.bin").stat().st_size == 3 << 29


def test_a_sparse_file_in_a_repository_is_copied_sparse(tmp_path: Path) -> None:
    """Fixed (workcopy.py): the copy the script runs on wrote every byte of a sparse
    file, so a repository holding a terabyte of holes (a command of an earlier session
    can leave one) filled the disk. Now holes stay holes."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    with open(repo / "holes.bin", "wb") as f:
        f.write(b"head")
        f.truncate(4 << 30)  # 4 GiB, four bytes of data
    done = _run(tmp_path, 'await tools.shell({command: "du -k holes.bin > usage.txt"});\n',
                "--repos", repo, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    used_kib = int((repo / "usage.txt").read_text().split()[0])
    assert used_kib < 1024, f"the copy of a 4 GiB sparse file used {used_kib} KiB"
    assert (repo / "holes.bin").stat().st_size == 4 << 30
