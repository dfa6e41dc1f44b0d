"""Batch runs that people can trust: all-or-nothing per repository, every argument
accounted for, filters, resume after Ctrl-C, publishing to a bare remote, and a worker
killed mid-run — through the real console script, git and worker processes."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_batch import INTERPRETER, interp, read_report, report_lines

from codemode.batch.applying import apply
from codemode.batch.changes import ApplyError, Change, compute

GIT_ID = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *GIT_ID, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def make_repo(path: Path, files: dict[str, str | bytes], commit: bool = True) -> Path:
    path.mkdir(parents=True)
    for name, content in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    git(path, "init", "-q", "-b", "main")
    if commit:
        git(path, "add", "-A")
        git(path, "commit", "-qm", "init")
    return path


def tree_state(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under ``root`` but .git: its mode and a hash of what it holds."""
    state: dict[str, tuple[int, str]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            held = "link:" + os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            held = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            held = "dir"
        state[rel] = (st.st_mode, held)
    return state


# Writes through every door: the file tools (write, patch, delete) and commands (a new
# file, an in-place append, a binary file, a deletion, a chmod), then maybe throws.
EVERY_DOOR = r"""
await tools.write_file({path: "tool.txt", content: "from the file tool\n"});
await tools.apply_patch(`*** Begin Patch
*** Update File: keep.txt
@@
-keep
+patched
*** Delete File: gone-by-tool.txt
*** End Patch`);
await tools.shell({command:
  "echo appended >> log.txt && printf 'B\\000\\377' > blob.bin && rm gone-by-shell.txt" +
  " && chmod +x run.sh && mkdir -p new/dir && echo deep > new/dir/f.txt"});
if (argv[0] === "fail") throw new Error(`failed in ${repo.name}`);
return "done";
"""

START = {
    "keep.txt": "keep\n",
    "log.txt": "first\n",
    "gone-by-tool.txt": "x\n",
    "gone-by-shell.txt": "y\n",
    "run.sh": "#!/bin/sh\n",
    "data.bin": b"\x00\x01\x02",
}
CHANGED = ["blob.bin", "gone-by-shell.txt", "gone-by-tool.txt", "keep.txt", "log.txt",
           "new/dir/f.txt", "run.sh", "tool.txt"]  # fmt: skip


@pytest.mark.parametrize("outcome", ["fail", "succeed"])
def test_a_failed_repository_is_left_exactly_as_it_was(tmp_path: Path, outcome: str) -> None:
    repo = make_repo(tmp_path / "repos" / "r", START)
    (tmp_path / "doors.js").write_text(EVERY_DOOR)
    before = tree_state(repo)
    git_before = git(repo, "status", "--porcelain")
    proc = interp("run", "doors.js", "--repos", repo, "--report", "r.jsonl", "--", outcome,
                  cwd=tmp_path)  # fmt: skip
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["changed_files"] == CHANGED, line
    assert line["changed_count"] == len(CHANGED)
    assert "+++ b/tool.txt" in line["diff"] and "-keep\n+patched\n" in line["diff"]
    assert "Binary files a/blob.bin and b/blob.bin differ" in line["diff"]
    if outcome == "fail":
        assert proc.returncode == 1, proc.stderr
        assert line["status"] == "failed" and line["rolled_back"] is True
        assert "failed in r" in line["error"]
        assert tree_state(repo) == before
        assert git(repo, "status", "--porcelain") == git_before == ""
        return
    assert proc.returncode == 0, proc.stderr
    assert line["status"] == "ok" and line["rolled_back"] is False
    assert (repo / "tool.txt").read_text() == "from the file tool\n"
    assert (repo / "keep.txt").read_text() == "patched\n"
    assert (repo / "log.txt").read_text() == "first\nappended\n"
    assert (repo / "blob.bin").read_bytes() == b"B\x00\xff"
    assert (repo / "data.bin").read_bytes() == b"\x00\x01\x02"
    assert (repo / "new" / "dir" / "f.txt").read_text() == "deep\n"
    assert not (repo / "gone-by-tool.txt").exists() and not (repo / "gone-by-shell.txt").exists()
    assert os.access(repo / "run.sh", os.X_OK)


def test_journal_apply_is_all_or_nothing_and_checks_its_base(tmp_path: Path) -> None:
    base = tmp_path / "base"
    (base / "sub").mkdir(parents=True)
    (base / "a.txt").write_text("a\n")
    (base / "f.txt").write_text("a file\n")
    (base / "sub" / "old.txt").write_text("old\n")
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(base), str(work)], check=True)
    (work / "a.txt").write_text("A\n")
    (work / "sub" / "old.txt").unlink()
    (work / "b.bin").write_bytes(bytes(range(256)))
    journal = compute(base, work)
    assert [(c.path, c.kind) for c in journal] == [
        ("sub/old.txt", "deleted"), ("a.txt", "file"), ("b.bin", "file"),
    ]  # fmt: skip
    before = tree_state(base)
    # A change that cannot be made (its folder is a file) after two that can: nothing
    # stays changed.
    broken = [*journal, Change("f.txt/x", "file", b"x")]
    with pytest.raises(ApplyError, match="cannot apply"):
        apply(base, broken)
    assert tree_state(base) == before
    # A file changed in the repository since the copy was made: refused, untouched.
    (base / "a.txt").write_text("someone else\n")
    before = tree_state(base)
    with pytest.raises(ApplyError, match=r"a\.txt changed in the repository"):
        apply(base, journal)
    assert tree_state(base) == before
    for bad in ("../x", "/etc/passwd", ".git/config", "a/../../x"):
        with pytest.raises(ApplyError, match="refusing"):
            apply(base, [Change(bad, "file", b"x")])
    # A journal (say from a hostile Ray worker) that makes a symlink out, then writes
    # through it: refused when it gets there, and the symlink taken back.
    outside = tmp_path / "outside"
    outside.mkdir()
    through = [Change("out", "symlink", os.fsencode(outside)), Change("out/x", "file", b"x")]
    with pytest.raises(ApplyError, match="leads outside the repository"):
        apply(base, through)
    assert not (outside / "x").exists() and not os.path.lexists(base / "out")
    (base / "a.txt").write_text("a\n")
    apply(base, journal)
    assert tree_state(base) == tree_state(work)
    assert not [p for p in base.rglob("*codemode*")]  # no staging or backup left


def test_report_lines_are_bounded(tmp_path: Path) -> None:
    # Over the diff's 1 MB text limit (codemode/batch/diff_text.py TEXT_BYTES): a diff of
    # it would be ~4 MB, twenty times the bound on a line.
    big = "".join(f"line {i}\n" for i in range(200_000))  # ~ 2 MB
    repo = make_repo(tmp_path / "repos" / "r", {"big.txt": big, "small.txt": "s\n"})
    (tmp_path / "big.js").write_text(
        'await tools.shell({command: "sed -i s/line/LINE/ big.txt"});\n'
        "for (let i = 0; i < 1200; i++)\n"  # over the 1,000 files a report names
        '  await tools.write_file({path: `f/${i}.txt`, content: "x".repeat(100)});\n'
        'console.log("y".repeat(100000));\n'
        'return "z".repeat(1000000);\n'
    )
    proc = interp("run", "big.js", "--repos", repo, "--report", "r.jsonl", cwd=tmp_path,
                  timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    raw = (tmp_path / "r.jsonl").read_text().splitlines()
    assert all(len(line) < 200_000 for line in raw), [len(line) for line in raw]
    line = json.loads(raw[-1])
    assert line["changed_count"] == 1201 and len(line["changed_files"]) == 1000
    assert "characters of the diff elided" in line["diff"]
    assert "Large files a/big.txt and b/big.txt differ" in line["diff"]
    assert "characters of the return value elided" in line["value"]
    assert "elided" in line["output"]
    assert (repo / "big.txt").read_text().startswith("LINE 0\n")


def test_every_argument_is_accounted_for(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    for name in ("r1", "r2"):
        make_repo(repos / name, {"a.txt": "a\n"}, commit=False)
    (repos / "notes").mkdir()  # neither a repository nor holding one
    (tmp_path / "name.js").write_text("return repo.name;\n")
    # As a shell glob expands it.
    proc = subprocess.run(
        ["sh", "-c", f'"{INTERPRETER}" run name.js --repos repos/* --report r.jsonl'],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = read_report(tmp_path / "r.jsonl")
    assert report["notes"]["status"] == "skipped"
    assert "not a working copy" in report["notes"]["reason"]
    assert report["r1"]["status"] == report["r2"]["status"] == "ok"
    assert f"skipped {repos / 'notes'}: not a working copy" in proc.stderr
    assert "2 repositories: 2 done, 0 failed, 0 not run, 1 skipped" in proc.stderr
    header = report_lines(tmp_path / "r.jsonl")[0]
    assert header["skipped"] == 1 and len(header["repositories"]) == 2
    allowed = subprocess.run(
        ["sh", "-c", f'"{INTERPRETER}" run name.js --repos repos/* --allow-empty --report a.jsonl'],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr
    assert read_report(tmp_path / "a.jsonl")["notes"]["status"] == "skipped"


def test_include_exclude_and_content_filters(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    for name in ("api-one", "api-two", "web-one", "web-two"):
        # Latin-1 bytes: the content filter searches bytes, whatever the encoding.
        content = b"uses old_call\xe9\n" if name.endswith("one") else b"nothing\n"
        make_repo(repos / name, {"src/x.py": content}, commit=False)
    (tmp_path / "name.js").write_text("return repo.name;\n")
    proc = interp(
        "run", "name.js", "--repos", "repos", "--include", "api-*", "--include", "web-*",
        "--exclude", "*-two", "--contains", r"old_call\xe9", "--report", "r.jsonl",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(read_report(tmp_path / "r.jsonl")) == ["api-one", "web-one"]
    header = report_lines(tmp_path / "r.jsonl")[0]
    assert header["dropped"] == {"include": 0, "exclude": 2, "contains": 0}
    assert header["filters"]["contains"] == r"old_call\xe9"
    proc = interp("run", "name.js", "--repos", "repos", "--include", "*/web-*",
                  "--contains", "nothing", "--report", "w.jsonl", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(read_report(tmp_path / "w.jsonl")) == ["web-two"]
    assert "2 dropped by --include, 1 dropped by --contains" in proc.stderr
    bad = interp("run", "name.js", "--repos", "repos", "--contains", "(", cwd=tmp_path)
    assert bad.returncode == 2 and "--contains '('" in bad.stderr


def test_resume_after_ctrl_c_runs_the_rest_once(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    for i in range(6):
        make_repo(repos / f"r{i}", {"count.txt": ""}, commit=False)
    (repos / "r4" / "FAIL").write_text("")
    # Not idempotent: each run appends a line. r4 fails; r5's command is slow.
    (tmp_path / "append.js").write_text(
        """
const names = (await tools.list_dir({})).entries.map(e => e.path);
await tools.shell({command: "echo run >> count.txt"});
if (names.includes("FAIL") && argv[0] !== "fixed") throw new Error("r4 fails");
if (repo.name === "r5" && argv[0] !== "fixed") {
  await tools.shell({command: "sleep 27.1828", timeout_ms: 120000});
}
return repo.name;
"""
    )
    proc = subprocess.Popen(
        [INTERPRETER, "run", "append.js", "--repos", "repos", "--jobs", "1", "--report", "r.jsonl"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            report = tmp_path / "r.jsonl"
            if report.exists() and len(report.read_text().splitlines()) >= 6:
                break  # header + r0..r4
            time.sleep(0.2)
        time.sleep(1.0)  # r5 is in its sleep now
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    first = read_report(tmp_path / "r.jsonl")
    assert {k: v["status"] for k, v in first.items()} == {
        "r0": "ok", "r1": "ok", "r2": "ok", "r3": "ok", "r4": "failed",
    }  # fmt: skip
    assert (repos / "r5" / "count.txt").read_text() == ""  # interrupted: left as it was
    # Another script is refused.
    (tmp_path / "other.js").write_text("return 1;\n")
    refused = interp("run", "other.js", "--resume", "r.jsonl", cwd=tmp_path)
    assert refused.returncode == 2 and "made with another script" in refused.stderr
    # --only-failed: r4 alone (r5, never finished, is not a failure).
    again = interp("run", "append.js", "--resume", "r.jsonl", "--only-failed", "--", "fixed",
                   cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "1 repositories: 1 done" in again.stderr
    rest = interp("run", "append.js", "--resume", "r.jsonl", "--", "fixed", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr
    assert "1 repositories: 1 done" in rest.stderr  # r5 only
    lines = report_lines(tmp_path / "r.jsonl")
    headers = [line for line in lines if line.get("kind") == "run"]
    assert len(headers) == 3 and headers[1]["resumed_from"] == "r.jsonl"
    assert headers[1]["repositories"] == [str((repos / "r4").resolve())]
    for i in range(6):
        assert (repos / f"r{i}" / "count.txt").read_text() == "run\n", i  # exactly once
    nothing = interp("run", "append.js", "--resume", "r.jsonl", cwd=tmp_path)
    assert nothing.returncode == 0 and "no repository left to finish" in nothing.stderr


def _publish_repos(root: Path) -> list[Path]:
    repos = []
    for name in ("a", "b", "same"):
        repo = make_repo(root / "repos" / name, {"v.txt": "1\n", ".gitignore": "build/\n"})
        remote = root / "remotes" / f"{name}.git"
        subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
        git(repo, "remote", "add", "origin", str(remote))
        repos.append(repo)
    return repos


def test_publish_branch_commit_and_push_to_a_bare_remote(tmp_path: Path) -> None:
    repos = _publish_repos(tmp_path)
    # A hook that would run if git ran hooks: it must not.
    for repo in repos:
        hook = repo / ".git" / "hooks" / "pre-push"
        hook.write_text(f"#!/bin/sh\ntouch {tmp_path}/hook-ran\nexit 1\n")
        hook.chmod(0o755)
    (tmp_path / "bump.js").write_text(
        'if (repo.name !== "same") await tools.write_file({path: "v.txt", content: "2\\n"});\n'
        'await tools.shell({command: "printf bin > new.bin"});\n'
        'await tools.shell({command: "rm new.bin"});\n'
        'if (repo.name !== "same")\n'
        '  await tools.shell({command: "mkdir build && echo o > build/x.o"});\n'
    )
    proc = interp(
        "run", "bump.js", "--repos", "repos", "--branch", "bump-v", "--commit-message",
        "Bump v to 2", "--author", "Batch Bot <bot@example.com>", "--push", "origin",
        "--report", "r.jsonl", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = read_report(tmp_path / "r.jsonl")
    for repo in repos[:2]:
        line = report[repo.name]
        assert line["branch"] == "bump-v" and line["pushed"] is True, line
        assert git(repo, "symbolic-ref", "--short", "HEAD") == "bump-v"
        assert git(repo, "status", "--porcelain") == ""
        shown = git(repo, "log", "-1", "--format=%an <%ae>|%s")
        assert shown == "Batch Bot <bot@example.com>|Bump v to 2"
        remote = tmp_path / "remotes" / f"{repo.name}.git"
        assert subprocess.run(["git", "-C", str(remote), "rev-parse", "bump-v"],
                              capture_output=True, text=True).stdout.strip() == line["commit"]
        assert (repo / "v.txt").read_text() == "2\n"
        # Ignored output reaches the working copy, not the commit.
        assert (repo / "build" / "x.o").read_text() == "o\n"
        assert git(repo, "ls-tree", "-r", "--name-only", "HEAD") == ".gitignore\nv.txt"
    same = report["same"]
    assert "branch" not in same and same["changed_files"] == []
    assert git(repos[2], "branch", "--list", "bump-v") == ""  # no change, no branch
    assert not (tmp_path / "hook-ran").exists()


def test_a_failed_push_restores_the_branch_and_the_files(tmp_path: Path) -> None:
    repos = _publish_repos(tmp_path)
    # b's remote refuses the branch (a hidden ref); not with a hook: a local target's
    # hooks never run (publish.LOCAL_RECEIVE_PACK).
    git(tmp_path / "remotes" / "b.git", "config", "receive.hideRefs", "refs/heads/bump-v")
    (tmp_path / "bump.js").write_text('await tools.write_file({path: "v.txt", content: "2\\n"});\n')
    proc = interp(
        "run", "bump.js", "--repos", "repos", "--branch", "bump-v", "--commit-message", "Bump",
        "--author", "Bot <bot@example.com>", "--push", "origin", "--report", "r.jsonl",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = read_report(tmp_path / "r.jsonl")
    failed = report["b"]
    assert failed["status"] == "failed" and failed["error_kind"] == "publish", failed
    assert failed["rolled_back"] is True and "git push" in failed["error"]
    b = repos[1]
    assert git(b, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(b, "branch", "--list", "bump-v") == ""
    assert (b / "v.txt").read_text() == "1\n" and git(b, "status", "--porcelain") == ""
    assert report["a"]["status"] == "ok"
    assert git(repos[0], "symbolic-ref", "--short", "HEAD") == "bump-v"
    usage = interp("run", "bump.js", "--repos", "repos", "--branch", "x", cwd=tmp_path)
    assert usage.returncode == 2 and "--branch needs --commit-message" in usage.stderr


def test_a_worker_killed_mid_run_is_retried_from_the_original_state(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    for i in range(4):
        make_repo(repos / f"r{i}", {"count.txt": ""}, commit=False)
    marker = tmp_path / "killed-once"
    # r1's worker is killed once, after the script appended a line: the retry starts
    # from the original (one line in the end, not two). r2's is killed every time, but
    # only once r1's kill has happened: were r2 to break the pool first, r1 would be
    # rerun as a suspect before its own kill, and that rerun would be its second death.
    (tmp_path / "kill.js").write_text(
        f"""
await tools.shell({{command: "echo run >> count.txt"}});
if (repo.name === "r1") {{
  const once = "[ -e {marker} ] || {{ touch {marker}; kill -9 $PPID; sleep 5; }}";
  await tools.shell({{command: once}});
}}
if (repo.name === "r2") {{
  const wait = "for i in $(seq 200); do [ -e {marker} ] && break; sleep 0.05; done";
  const after = wait + "; kill -9 $PPID; sleep 5";
  await tools.shell({{command: after}});
}}
return repo.name;
"""
    )
    proc = interp(
        "run", "kill.js", "--repos", "repos", "--jobs", "2", "--report", "r.jsonl",
        "--sandbox", "danger-full-access", "--approval", "never", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report: dict[str, Any] = read_report(tmp_path / "r.jsonl")
    assert report["r1"]["status"] == "ok" and report["r1"]["attempts"] == 2, report["r1"]
    assert report["r2"]["status"] == "failed" and report["r2"]["attempts"] == 2
    assert report["r2"]["error_kind"] == "worker"
    assert (repos / "r1" / "count.txt").read_text() == "run\n"
    assert (repos / "r2" / "count.txt").read_text() == ""
    for name in ("r0", "r3"):
        assert (repos / name / "count.txt").read_text() == "run\n"


def test_what_a_script_does_to_git_metadata_stays_in_its_copy(tmp_path: Path) -> None:
    """A script (here with an unconfined shell) that plants a hook and config in its
    .git, commits and moves HEAD: none of it reaches the repository (publishing with
    the host's git then runs no hook), only its file change does."""
    repo = make_repo(tmp_path / "repos" / "r", {"v.txt": "1\n"})
    config_before = (repo / ".git" / "config").read_text()
    head_before = git(repo, "rev-parse", "HEAD")
    planted = tmp_path / "planted-ran"
    (tmp_path / "plant.js").write_text(
        f"""
await tools.shell({{command: [
  "mkdir -p .git/hooks",
  "printf '#!/bin/sh\\\\ntouch {planted}\\\\n' > .git/hooks/post-commit",
  "cp .git/hooks/post-commit .git/hooks/reference-transaction",
  "chmod +x .git/hooks/post-commit .git/hooks/reference-transaction",
  "git config codemode.planted yes",
  "echo 2 > v.txt",
  "git -c user.name=s -c user.email=s@x commit -qam inside",
].join(" && ")}});
const out = await tools.shell({{command: "git log --oneline | wc -l"}});
return out.output.trim();
"""
    )
    proc = interp(
        "run", "plant.js", "--repos", repo, "--report", "r.jsonl", "--sandbox",
        "danger-full-access", "--approval", "never", "--branch", "b", "--commit-message",
        "From the batch", "--author", "Bot <bot@example.com>", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert line["value"] == "2"  # git worked in the copy (objects borrowed), committed there
    assert line["changed_files"] == ["v.txt"]
    assert (repo / ".git" / "config").read_text() == config_before
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert git(repo, "rev-parse", "HEAD~1") == head_before  # the batch's commit only
    assert git(repo, "log", "-1", "--format=%s") == "From the batch"
    planted.unlink()  # the hooks ran in the copy, on the script's own commit
    git(repo, "commit", "-q", "--allow-empty", "-m", "after")  # the repository's own hooks
    assert not planted.exists()


def test_progress_shows_escape_sequences_from_paths_and_errors() -> None:
    import io

    from codemode.batch.models import RepoResult
    from codemode.batch.progress import BatchProgress

    stream = io.StringIO()
    with BatchProgress(1, stream, live=False) as progress:
        progress.add(RepoResult(repository="/r/\x1b[2Jskip", status="skipped", duration_s=0,
                                tool_calls=0, reason="not a working copy"))  # fmt: skip
        progress.add(RepoResult(repository="/r/a", status="failed", duration_s=0, tool_calls=0,
                                error="Error: \x1b]52;c;cGF5bG9hZA==\x07"))  # fmt: skip
    text = stream.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "skipped /r/^[[2Jskip: not a working copy" in text
    assert "Error: ^[]52;c;cGF5bG9hZA==^G" in text


# A stand-in for gh / glab: records its arguments and folder, answers as the real one
# does (the new request's URL), and refuses in repository "b".
FAKE_REQUEST_TOOL = """#!/bin/sh
name=$(basename "$PWD")
{ printf '%s\\n' "$PWD" "$(basename "$0")"; printf '%s\\0' "$@"; } > "$RECORD/$name"
if [ "$name" = b ]; then echo "pull request create failed: no permission" >&2; exit 1; fi
echo "Creating pull request for bump-v into main"
echo "https://forge.example/team/$name/pull/7"
"""


def _fake_tools(root: Path, *names: str) -> tuple[Path, Path]:
    bin_dir, record = root / "fake-bin", root / "calls"
    bin_dir.mkdir()
    record.mkdir()
    for name in names:
        tool = bin_dir / name
        tool.write_text(FAKE_REQUEST_TOOL)
        tool.chmod(0o755)
    return bin_dir, record


def test_pull_request_opened_after_the_push_and_a_refused_one_undoes_it(tmp_path: Path) -> None:
    repos = _publish_repos(tmp_path)
    bin_dir, record = _fake_tools(tmp_path, "gh")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD": str(record)}
    (tmp_path / "bump.js").write_text(
        'if (repo.name !== "same") await tools.write_file({path: "v.txt", content: "2\\n"});\n'
    )
    proc = interp(
        "run", "bump.js", "--repos", "repos", "--branch", "bump-v", "--commit-message",
        "Bump v to 2\n\nAll services move to v2.", "--author", "Bot <bot@example.com>",
        "--push", "origin", "--pull-request", "--report", "r.jsonl", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # b's request was refused
    report = read_report(tmp_path / "r.jsonl")
    a, b, _ = repos
    assert report["a"]["status"] == "ok", report["a"]
    assert report["a"]["pull_request"] == "https://forge.example/team/a/pull/7"
    folder, tool, args = (record / "a").read_text().split("\n", 2)
    assert (folder, tool) == (str(a), "gh")
    assert args.split("\0")[:-1] == [
        "pr", "create", "--head", "bump-v", "--base", "main", "--title", "Bump v to 2",
        "--body", "All services move to v2.",
    ]  # fmt: skip
    assert git(a, "symbolic-ref", "--short", "HEAD") == "bump-v"
    # b: pushed, then its request refused: the repository's failure, undone everywhere.
    line = report["b"]
    assert line["status"] == "failed" and line["error_kind"] == "publish", line
    assert "gh pr create: pull request create failed: no permission" in line["error"]
    assert "pull_request" not in line and line["rolled_back"] is True
    assert git(b, "symbolic-ref", "--short", "HEAD") == "main"
    assert git(b, "branch", "--list", "bump-v") == ""
    assert (b / "v.txt").read_text() == "1\n" and git(b, "status", "--porcelain") == ""
    remote_refs = subprocess.run(["git", "-C", str(tmp_path / "remotes" / "b.git"), "branch"],
                                 capture_output=True, text=True).stdout  # fmt: skip
    assert "bump-v" not in remote_refs
    # No change, no branch, no request.
    assert not (record / "same").exists() and "pull_request" not in report["same"]
    header = report_lines(tmp_path / "r.jsonl")[0]
    assert header["publish"]["pull_request"] is True


def test_pull_request_usage_and_the_tool_chosen_by_the_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish_repos(tmp_path)
    (tmp_path / "bump.js").write_text("return 1;\n")
    base = ["run", "bump.js", "--repos", "repos", "--branch", "x", "--commit-message", "m"]
    no_push = interp(*base, "--pull-request", cwd=tmp_path)
    assert no_push.returncode == 2 and "--pull-request needs --push" in no_push.stderr
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    no_tool = interp(*base, "--push", "origin", "--pull-request", cwd=tmp_path,
                     env={**os.environ, "PATH": str(empty)})  # fmt: skip
    assert no_tool.returncode == 2, no_tool.stderr
    assert "--pull-request needs gh (GitHub) or glab (GitLab) on PATH" in no_tool.stderr
    alone = interp("run", "bump.js", "--repos", "repos", "--pull-request", cwd=tmp_path)
    assert alone.returncode == 2 and "--pull-request goes with --branch" in alone.stderr

    from codemode.batch import pull_request

    bin_dir, _ = _fake_tools(tmp_path, "gh", "glab")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert pull_request._choose("git@gitlab.example.com:team/a.git") == "glab"
    assert pull_request._choose("https://gitlab.com/team/a") == "glab"
    assert pull_request._choose("https://github.com/team/a") == "gh"
    (bin_dir / "gh").unlink()
    assert pull_request._choose("https://github.com/team/a") == "glab"  # the one there is
