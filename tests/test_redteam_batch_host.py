"""`interpreter run --repos`, attacked where the driver acts on the host: the journal
taken of a copy a script shaped, the selection of repositories, the write-ahead
journal's recovery, the commit and the push.

"Fixed" tests failed before the change their docstring names; "held" ones found
nothing to fix and stay as regression tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_batch import read_report
from test_batch_changes import git, make_repo
from test_redteam_batch import _hook, _run

from codemode.batch.compare import MAX_DEPTH

LONG = "a" * 20  # 250 of these: past PATH_MAX (4096 bytes)


def _shell(command: str) -> str:
    return f"await tools.shell({{command: {json.dumps(command)}}});\n"


def _bash(body: str) -> str:
    """A script that runs ``body`` with bash (from a file: the shell tool asks before
    a command whose target is known only at run time), and removes the file."""
    write = f"await tools.write_file({{path: 'mk.sh', content: {json.dumps(body)}}});\n"
    return write + _shell("bash mk.sh; rm mk.sh")


def _chain(top: Path, depth: int, files: dict[str, bytes]) -> None:
    """A chain of ``depth`` folders named LONG under ``top``, ``files`` at its bottom:
    made by descriptor (no path this long can be named)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(LONG, dir_fd=fd)
            inner = os.open(LONG, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        for name, data in files.items():
            out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
            os.write(out, data)
            os.close(out)
    finally:
        os.close(fd)


def _bottom(top: Path, depth: int) -> dict[str, bytes]:
    """The files at the bottom of the chain under ``top``."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            inner = os.open(LONG, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        found: dict[str, bytes] = {}
        for name in os.listdir(fd):
            if name != LONG:
                one = os.open(name, os.O_RDONLY, dir_fd=fd)
                found[name] = os.read(one, 1 << 16)
                os.close(one)
        return found
    finally:
        os.close(fd)


def _rm(path: Path) -> None:
    subprocess.run(["rm", "-rf", "--", str(path)], check=True)  # (any depth)


# --- the journal of a deep copy -------------------------------------------------------


def test_a_change_past_path_max_is_applied_not_lost(tmp_path: Path) -> None:
    """Fixed (compare.py): the journal was taken by walking both trees by full path; a
    folder whose path is longer than PATH_MAX could not be listed and was skipped
    without a word, so the run said ``ok``, applied the shallow changes and lost the
    deep ones (a partial apply). Now both trees are walked by descriptor."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    _chain(repo, 250, {"old.txt": b"old\n"})
    down = f"for i in $(seq 250); do cd {LONG} || exit 1; done"
    script = _shell(f"bash -c '{down}; echo new > old.txt; echo made > new.txt' && "
                    "echo 2 > v.txt")  # fmt: skip
    try:
        done = _run(tmp_path, script, "--repos", repo)
        assert done.returncode == 0, done.stderr
        assert (repo / "v.txt").read_text() == "2\n"
        assert _bottom(repo, 250) == {"old.txt": b"new\n", "new.txt": b"made\n"}
        line = read_report(tmp_path / "r.jsonl")["r"]
        assert len(line["changed_files"]) == 3, line["changed_files"]
    finally:
        _rm(repo)


def test_a_tree_past_the_depth_bound_fails_its_repository_with_a_limit(tmp_path: Path) -> None:
    """Fixed (compare.py): a script that makes a chain of folders deeper than any
    project (``MAX_DEPTH``) with a file at its bottom had its shallow changes applied
    and the rest dropped silently. Now the repository fails, ``error_kind: "limit"``,
    saying why, and nothing is applied."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    depth = MAX_DEPTH + 5
    script = _bash(f"echo 2 > v.txt\nmkdir -p \"$(printf 'd/%.0s' $(seq {depth}))\"\n"
                   f"for i in $(seq {depth}); do cd d || exit 1; done\necho x > f\n")  # fmt: skip
    done = _run(tmp_path, script, "--repos", repo, timeout=300)
    assert done.returncode == 1, done.stderr
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["error_kind"] == "limit" and "folders deep" in line["error"], line
    assert (repo / "v.txt").read_text() == "1\n"
    assert sorted(os.listdir(repo)) == [".git", "v.txt"]


def test_the_diff_of_a_huge_deleted_file_is_not_read_whole(tmp_path: Path) -> None:
    """Fixed (diff_text.py): the report's diff read the repository's old file whole
    (``read_bytes``), whatever its size, only to find it too large to diff: a script
    that deleted a terabyte sparse file had the worker allocate a terabyte. Run here
    under a 3 GiB address-space limit, over an 8 GiB sparse file."""
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(8 << 30)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "from pathlib import Path\n"
        "from codemode.batch.changes import Change\n"
        "from codemode.batch.diff_text import render\n"
        "change = Change('big.bin', 'deleted', base='file:' + '0' * 64)\n"
        "print(render(Path(sys.argv[1]), [change]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Large files a/big.bin and b/big.bin differ (8589934592 -> 0 bytes" in done.stdout


# --- the links a journal makes --------------------------------------------------------


def test_a_symlink_that_climbs_out_through_another_link_is_refused(tmp_path: Path) -> None:
    """Fixed (changes.py): a journal's symlink was judged by its text alone. ``s -> ..``
    in ``a/`` and ``a/up -> s/..`` are each inside the repository as written, but
    ``up`` leads to the folder above it: a door out, made by the apply in the user's
    repository. So is ``x -> s/..`` beside a link ``s -> .`` the repository already
    holds, and an absolute ``/repo/s/..``. Now every link is followed as the kernel
    would, through the journal's links and the repository's; one that leads out fails
    its repository, nothing applied (its escape sequences shown, not obeyed)."""
    made = make_repo(tmp_path / "repos" / "made", {"v.txt": "1\n", "a/k": "k\n"})
    held = make_repo(tmp_path / "repos" / "held", {"v.txt": "1\n"})
    (held / "s").symlink_to(".")
    absolute = make_repo(tmp_path / "repos" / "abs", {"v.txt": "1\n"})
    (absolute / "s").symlink_to(".")
    script = _shell("echo 2 > v.txt") + (
        'if (repo.name === "made") await tools.shell({command: '
        '"ln -s .. a/s && ln -s s/.. \\"a/up$(printf \'\\\\033[2J\')\\""});\n'
        'if (repo.name === "held") await tools.shell({command: "ln -s s/.. x"});\n'
        'if (repo.name === "abs") await tools.shell({command: '
        '"ln -s " + JSON.stringify(repo.origin + "/s/..") + " x"});\n'
    )
    done = _run(tmp_path, script, "--repos", "repos")
    assert done.returncode == 1, done.stderr
    report = read_report(tmp_path / "r.jsonl")
    for name, repo in (("made", made), ("held", held), ("abs", absolute)):
        line = report[name]
        assert line["error_kind"] == "apply" and "leads outside" in line["error"], line
        assert (repo / "v.txt").read_text() == "1\n"
    assert not (made / "a" / "s").is_symlink() and not (held / "x").is_symlink()
    assert "\x1b" not in done.stderr


def test_links_that_stay_inside_through_other_links_are_applied(tmp_path: Path) -> None:
    """Held: the stricter check still lets through what real trees hold: a link to a
    link, ``..`` through a link that goes deeper, a link to a folder the journal
    makes."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n", "lib/x/m.js": "m\n"})
    script = _shell("mkdir -p bin node_modules/.bin && ln -s ../lib/x bin/cur && "
                    "ln -s cur/.. bin/libs && ln -s ../../bin/cur/m.js node_modules/.bin/m "
                    f"&& ln -s {repo}/bin/libs/x abs")  # fmt: skip
    done = _run(tmp_path, script, "--repos", repo)
    assert done.returncode == 0, done.stderr
    assert (repo / "node_modules" / ".bin" / "m").read_text() == "m\n"
    assert (repo / "bin" / "libs").resolve() == repo / "lib"
    assert (repo / "abs").resolve() == repo / "lib" / "x"


# --- which repositories ---------------------------------------------------------------


def test_symlinked_subfolders_of_a_repos_dir_are_reported_not_followed(tmp_path: Path) -> None:
    """Fixed (repos.py): ``--repos DIR`` took every subfolder that was a working copy,
    links included, resolved: a link in DIR to a repository elsewhere (under the
    user's home) had the batch change, commit and push there, a link to the same
    repository was dropped silently, and a loop or a link to ``/`` vanished from the
    accounting. Now a subfolder that is a link is skipped and reported by name; a
    path the user names (an argument) is still taken through a link."""
    src = tmp_path / "src"
    mine = make_repo(src / "mine", {"v.txt": "1\n"})
    victim = make_repo(tmp_path / "home" / "victim", {"v.txt": "1\n"})
    (src / "elsewhere").symlink_to(victim)
    (src / "root").symlink_to("/")
    (src / "loop").symlink_to("loop")
    (src / "again").symlink_to("mine")
    (src / "notes.txt").write_text("not a repository\n")
    (src / "notes-link").symlink_to("notes.txt")
    script = _shell("echo 2 > v.txt")
    done = _run(tmp_path, script, "--repos", src)
    assert done.returncode == 1, done.stderr  # skipped arguments fail the run
    assert (mine / "v.txt").read_text() == "2\n"
    assert (victim / "v.txt").read_text() == "1\n"
    report = read_report(tmp_path / "r.jsonl")
    skipped = {name for name, line in report.items() if line["status"] == "skipped"}
    assert skipped == {"elsewhere", "root", "loop", "again"}, report
    assert all("symbolic link" in report[n]["reason"] for n in skipped)
    assert "skipped" in done.stderr and "elsewhere" in done.stderr
    named = _run(tmp_path, script, "--repos", src / "elsewhere")
    assert named.returncode == 0, named.stderr
    assert (victim / "v.txt").read_text() == "2\n"


# --- what git writes and runs ---------------------------------------------------------


def test_a_newline_in_a_path_cannot_add_or_remove_commit_entries(tmp_path: Path) -> None:
    """Fixed (publish.py): the commit was built with ``update-index --index-info`` fed
    one entry per line, so a file the script named ``x\\n100644 BLOB\\tinjected.txt``
    put ``injected.txt`` (any blob the repository holds) in the commit, and
    ``y\\n0 000...\\tv.txt`` took ``v.txt`` out of it, while the working copy got
    neither: the pushed branch was not what the journal applied. Now the entries are
    NUL-separated, and such names are committed as the names they are."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n", "w.txt": "w\n"})
    blob = git(repo, "rev-parse", "HEAD:v.txt")
    add, remove = f"x\n100644 {blob}\tinjected.txt", f"y\n0 {'0' * 40}\tv.txt"
    # (by a command: the file tools refuse such names)
    zeros = "0" * 40
    script = _bash(f"printf a > \"$(printf 'x\\n100644 {blob}\\tinjected.txt')\"\n"
                   f"printf b > \"$(printf 'y\\n0 {zeros}\\tv.txt')\"\n"
                   "echo w2 > w.txt\n")  # fmt: skip
    done = _run(tmp_path, script, "--repos", repo, "--branch", "b", "--commit-message", "m",
                "--author", "Bot <bot@example.com>")  # fmt: skip
    assert done.returncode == 0, done.stderr
    commit = read_report(tmp_path / "r.jsonl")["r"]["commit"]
    listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", commit], cwd=repo,
                            capture_output=True, check=True).stdout  # fmt: skip
    names = set(os.fsdecode(n) for n in listed.split(b"\0") if n)
    assert names == {"v.txt", "w.txt", add, remove}, names
    assert (repo / add).read_text() == "a" and (repo / "v.txt").read_text() == "1\n"


FAKE_SSH = """#!/bin/sh
# Stands in for ssh to this machine: runs the remote command here, as sshd would.
echo "$@" >> {log}
while [ $# -gt 1 ]; do shift; done
exec sh -c "$1"
"""


def test_an_ssh_push_to_this_machine_runs_none_of_the_targets_hooks(tmp_path: Path) -> None:
    """Fixed (push_target.py, publish.py): the repository's remote is an ssh URL to this
    machine (``ssh://localhost``, ``git@127.0.0.1:``, ``[::1]``) naming a bare
    repository in its own working tree, hooks and a ``core.hooksPath`` of its own.
    sshd here starts ``git-receive-pack`` there as the user, with the target's config:
    its hooks ran on the host, as a local path's did before it got the overrides. Now
    such a push gets the same overrides on receive-pack's command line. (No sshd here:
    a stand-in ssh on PATH runs the remote command as sshd would.)"""
    marker = tmp_path / "hook-ran"
    log = tmp_path / "ssh.log"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text(FAKE_SSH.format(log=log))
    (bin_dir / "ssh").chmod(0o755)
    urls = {"a": "ssh://localhost{}", "b": "git@127.0.0.1:{}", "c": "ssh://git@[::1]:22{}"}
    remotes = {}
    for name, url in urls.items():
        repo = make_repo(tmp_path / "repos" / name, {"v.txt": "1\n"})
        remote = repo / "vendor" / "evil.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        for hook in ("pre-receive", "update", "post-receive", "post-update",
                     "reference-transaction"):  # fmt: skip
            _hook(remote / "hooks" / hook, marker)
            _hook(repo / "vendor" / "more-hooks" / hook, marker)
        git(remote, "config", "core.hooksPath", str(repo / "vendor" / "more-hooks"))
        git(repo, "remote", "add", "origin", url.format(remote))
        remotes[name] = remote
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = _run(tmp_path, _shell("echo 2 > v.txt"), "--repos", "repos", "--branch", "b",
                "--commit-message", "m", "--author", "Bot <bot@example.com>", "--push",
                "origin", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), marker.read_text()
    assert log.read_text().count("core.hooksPath=/dev/null") == 3, log.read_text()
    report = read_report(tmp_path / "r.jsonl")
    for name, remote in remotes.items():
        assert report[name]["pushed"] is True
        assert git(remote, "rev-parse", "b") == report[name]["commit"]


@pytest.mark.parametrize(("url", "here"), [
    ("ssh://localhost/x", True), ("ssh://LocalHost./x", True), ("ssh://a.localhost/x", True),
    ("git+ssh://u@127.0.0.1:2222/x", True), ("ssh+git://127.1/x", True),
    ("ssh://2130706433/x", True), ("ssh://0x7f000001/x", True), ("ssh://0/x", True),
    ("ssh://[::1]/x", True), ("ssh://[::ffff:127.0.0.1]/x", True), ("git@127.0.0.1:x", True),
    ("[::1]:x", True), ("[u@127.0.0.1:22]:x", True), ("localhost:x.git", True),
    ("ssh://203.0.113.7/x", False), ("git@198.51.100.3:x", False), ("https://127.0.0.1/x", False),
    ("file:///srv/x", False), ("/srv/x", False), ("ext::ssh localhost", False),
    ("localhost::x", False),
])  # fmt: skip
def test_ssh_urls_to_this_machine_are_told_apart(url: str, here: bool) -> None:
    """The rule the fix above relies on: any spelling of this machine, none other (IP
    literals only: no name here needs a resolver)."""
    from codemode.batch.push_target import reaches_this_machine

    assert reaches_this_machine(url) is here


def test_this_machines_own_address_counts_as_this_machine() -> None:
    """Held: an address of one of this machine's interfaces (not loopback) is this
    machine too (a socket can be bound to it here)."""
    from codemode.batch.push_target import reaches_this_machine

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # (UDP: nothing is sent)
        except OSError:
            pytest.skip("no IPv4 route here")
        address = probe.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("only loopback here")
    assert reaches_this_machine(f"git@{address}:x") is True


# --- the write-ahead journal's recovery -----------------------------------------------


def _die(*args: object, **kwargs: object) -> None:
    os.kill(os.getpid(), 9)


def test_a_recovery_never_writes_through_a_parent_swapped_for_a_link_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held: a driver killed after the apply's writes and before its journal was
    removed; meanwhile the folder holding a changed file was moved out of the
    repository and a link to it put in its place. The next recovery follows no link
    out of the repository: the moved file keeps the applied bytes, nothing is written
    there, and the line says what was not restored."""
    from codemode.batch.applying import apply
    from codemode.batch.changes import compute
    from codemode.tools.store import journal

    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    repo = make_repo(tmp_path / "r", {"sub/f.txt": "old\n", "v.txt": "1\n"})
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(repo), str(work)], check=True)
    (work / "sub" / "f.txt").write_text("new\n")
    (work / "v.txt").write_text("2\n")
    changes = compute(repo, work)
    pid = os.fork()
    if pid == 0:  # the driver, killed once every write is done
        try:
            journal.Recording.close = _die  # type: ignore[method-assign,assignment]
            apply(repo, changes)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), status
    outside = tmp_path / "outside"
    (repo / "sub").rename(outside)
    (repo / "sub").symlink_to(outside)
    lines = journal.recover(repo)
    assert (outside / "f.txt").read_text() == "new\n"
    assert (repo / "v.txt").read_text() == "1\n"  # the rest is rolled back
    assert any("Not restored" in line and "sub/f.txt" in line for line in lines), lines
