"""Writes codemode's own (unconfined) process makes into a repository that a program
shaped: a batch script plants, in its own journal, a symlink at every temporary name the
driver could pick (``.NAME.codemode-<pid>-new`` for every pid up to ``pid_max``) pointing
at a file outside the repository (a stand-in for ``~/.bashrc``). Applying the journal,
plainly or with ``--branch``, must neither write that file nor change its mode, and must
not report the run ``ok``."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from test_batch import interp, read_report

GIT_ID = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]


def _pid_max() -> int:
    return int(Path("/proc/sys/kernel/pid_max").read_text())


# Plants the links with one perl process (a shell loop of `ln -s` would start 32,768
# programs), then writes the file whose temporary name they cover.
PLANT = r"""
const outside = argv[0];
const pidMax = Number(argv[1]);
const planted = await tools.shell({command:
  "perl -e 'for my $i (1..$ARGV[1]) " +
  `{ symlink($ARGV[0], ".x.txt.codemode-$i-new") or die "$i: $!" }' ` +
  `'${outside}' ${pidMax} && ls -A | grep -c '^.x.txt.codemode-'`,
  timeout_ms: 300000});  // (pid_max links: past the default 10 s on a busy machine)
await tools.write_file({path: "x.txt", content: "planted text\n"});
return planted.output.trim();
"""


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "x.txt").write_text("before\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *GIT_ID, *args], cwd=path, check=True, capture_output=True)
    return path


@pytest.mark.parametrize("how", ["apply", "branch"])
def test_a_batch_script_cannot_write_through_links_it_planted(tmp_path: Path, how: str) -> None:
    repo = _repo(tmp_path / "repos" / "r")
    outside = tmp_path / "bashrc"
    outside.write_text("the user's own\n")
    outside.chmod(0o600)
    (tmp_path / "plant.js").write_text(PLANT)
    extra = ["--branch", "planted", "--commit-message", "m"] if how == "branch" else []
    proc = interp(
        "run", "plant.js", "--repos", repo, "--approval", "never", *extra,
        "--report", "r.jsonl", "--", outside, str(_pid_max()), cwd=tmp_path, timeout=600,
    )  # fmt: skip
    line = read_report(tmp_path / "r.jsonl")["r"]
    assert outside.read_text() == "the user's own\n", line
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600
    # The script did plant every name (so the driver's was among them) ...
    assert line.get("value") == str(_pid_max()), line
    # ... and the run says the repository was refused, untouched.
    assert line["status"] == "failed" and line["error_kind"] in ("apply", "publish"), line
    assert "leads outside the repository" in line["error"], line
    assert proc.returncode == 1, proc.stderr
    assert (repo / "x.txt").read_text() == "before\n"
    assert not [p for p in os.listdir(repo) if "codemode" in p]


def _plain_repo(path: Path) -> Path:
    path.mkdir()
    (path / "x.txt").write_text("before\n")
    (path / "README.md").write_text("readme\n")
    (path / "README.md").chmod(0o644)
    return path


def test_apply_writes_no_file_through_a_link_the_journal_made_inside(tmp_path: Path) -> None:
    # The same plant, applied directly and pointing inside the repository: the driver's
    # temporary name (this process's pid, as the old writer chose it) is a link to
    # README.md. The write must not land in README.md (whose base nobody checked) nor
    # loosen its mode; x.txt gets the text as a file of its own.
    from codemode.batch.applying import apply
    from codemode.batch.changes import Change, fingerprint

    repo = _plain_repo(tmp_path / "r")
    plant = [
        Change(f".x.txt.codemode-{os.getpid()}-{end}", "symlink", b"README.md")
        for end in ("new", "bak")
    ]
    text = Change("x.txt", "file", b"planted\n", executable=True, base=fingerprint(repo / "x.txt"))
    apply(repo, [*plant, text])
    assert (repo / "README.md").read_text() == "readme\n"
    assert stat.S_IMODE((repo / "README.md").stat().st_mode) == 0o644
    assert not (repo / "x.txt").is_symlink() and (repo / "x.txt").read_text() == "planted\n"
    assert os.access(repo / "x.txt", os.X_OK)
    # No temporary or moved-aside file is left (the planted links are the journal's own).
    left = {p for p in os.listdir(repo) if "codemode" in p}
    assert left == {c.path for c in plant}


def test_apply_refuses_a_journal_link_that_leads_outside(tmp_path: Path) -> None:
    from codemode.batch.applying import apply
    from codemode.batch.changes import ApplyError, Change, fingerprint

    repo = _plain_repo(tmp_path / "r")
    outside = tmp_path / "bashrc"
    outside.write_text("mine\n")
    for target in (str(outside), "../bashrc", "sub/../../bashrc", f"{repo}/../bashrc"):
        journal = [
            Change(f".x.txt.codemode-{os.getpid()}-new", "symlink", os.fsencode(target)),
            Change("x.txt", "file", b"planted\n", base=fingerprint(repo / "x.txt")),
        ]
        with pytest.raises(ApplyError, match="leads outside the repository"):
            apply(repo, journal)
    assert outside.read_text() == "mine\n" and (repo / "x.txt").read_text() == "before\n"
    # A link that stays inside is a link like any other.
    apply(repo, [Change("docs", "symlink", b"sub/../README.md")])
    assert os.readlink(repo / "docs") == "sub/../README.md"


def test_eval_setup_copies_links_as_links(tmp_path: Path) -> None:
    # A suite's set-up folder holding links to the user's files: the workspace the model
    # works in gets the links (which the tools refuse to follow out), never the contents.
    from codemode.eval.suite import Task

    secret = tmp_path / "home" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY\n")
    setup = tmp_path / "suite" / "t" / "setup"
    (setup / "sub").mkdir(parents=True)
    (setup / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (setup / "sub" / "run.sh").chmod(0o755)
    (setup / "key").symlink_to(secret)
    (setup / "home").symlink_to(secret.parent)
    root = tmp_path / "workspace"
    root.mkdir()
    Task("t", setup.parent, "p", "a", lambda _: None).setup(root)
    assert (root / "key").is_symlink() and (root / "home").is_symlink()
    assert not [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                and "PRIVATE" in p.read_text()]  # fmt: skip
    assert stat.S_IMODE((root / "sub" / "run.sh").stat().st_mode) == 0o755
    assert (root / "sub" / "run.sh").read_text() == "#!/bin/sh\n"


def test_a_report_name_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    # A report kept inside a repository of the run: an earlier run's journal could have
    # made its name a link to a file of the user's, which the next run would write.
    repo = _repo(tmp_path / "repos" / "r")
    outside = tmp_path / "bashrc"
    outside.write_text("mine\n")
    (repo / "r.jsonl").symlink_to(outside)
    (tmp_path / "noop.js").write_text("return 1;\n")
    proc = interp("run", "noop.js", "--repos", repo, "--report", repo / "r.jsonl", cwd=tmp_path)
    assert outside.read_text() == "mine\n"
    assert proc.returncode == 2, proc.stderr
    assert f"cannot write the report {repo / 'r.jsonl'}: it is a symlink" in proc.stderr
    assert "Traceback" not in proc.stderr


# The same plant applied by a driver of each user, in a folder that user owns (so a
# write through the link would succeed if it were made): root, and nobody (uid 65534,
# when the tests run as root).
APPLY_PLANT = r"""
import os, sys
from pathlib import Path
from codemode.batch.applying import apply
from codemode.batch.changes import ApplyError, Change, fingerprint
repo, target = Path(sys.argv[1]), sys.argv[2]
plant = [Change(f".x.txt.codemode-{os.getpid()}-{end}", "symlink", os.fsencode(target))
         for end in ("new", "bak")]
text = Change("x.txt", "file", b"planted\n", base=fingerprint(repo / "x.txt"))
try:
    apply(repo, [*plant, text])
    print("applied")
except ApplyError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("where", ["outside", "inside"])
def test_a_driver_of_each_user_writes_through_no_planted_link(user: str, where: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the test runs the driver as root and as nobody (uid 65534)")
    import shutil
    import sys
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="codemode-hostwrite-"))
    try:
        top.chmod(0o755)
        repo = _plain_repo(top / "r")
        victim = top / "bashrc" if where == "outside" else repo / "README.md"
        victim.write_text("mine\n")
        victim.chmod(0o600)
        uid = 0 if user == "root" else 65534
        for path in [top, *top.rglob("*")]:
            os.lchown(path, uid, uid)
        prefix = [] if user == "root" else [
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # fmt: skip
        target = str(victim) if where == "outside" else "README.md"
        home = top / "home"  # the driver's own codemode home (its write journal)
        home.mkdir()
        os.chown(home, uid, uid)
        proc = subprocess.run(
            [*prefix, sys.executable, "-c", APPLY_PLANT, str(repo), target],
            capture_output=True, text=True, cwd=top, timeout=60,
            env={**os.environ, "CODEMODE_HOME": str(home)},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert victim.read_text() == "mine\n", proc.stdout
        assert stat.S_IMODE(victim.stat().st_mode) == 0o600
        if where == "outside":
            assert proc.stdout.startswith("refused:") and "leads outside" in proc.stdout
            assert (repo / "x.txt").read_text() == "before\n"
        else:
            assert proc.stdout.strip() == "applied", proc.stdout
            assert (repo / "x.txt").read_text() == "planted\n"
            assert not (repo / "x.txt").is_symlink()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_the_writer_follows_no_link_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    from codemode.hostfs.writer import Refused, Writer

    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("mine\n")
    (root / "last").symlink_to(outside / "f")
    (root / "way").symlink_to(outside)
    (root / "inner").symlink_to("sub")
    writer = Writer(root)
    # A link in the last place is replaced, with the mode set on the new file.
    assert writer.write("last", b"new\n", 0o640) is False
    assert not (root / "last").is_symlink() and (root / "last").read_text() == "new\n"
    assert stat.S_IMODE((root / "last").stat().st_mode) == 0o640
    # A link on the way is refused, even one that stays inside.
    for rel in ("way/f", "inner/f"):
        with pytest.raises(Refused, match="is a symlink"):
            writer.write(rel, b"x")
    assert (outside / "f").read_text() == "mine\n" and not (root / "sub" / "f").exists()
    # Removed: the link itself, never what it points to.
    writer.remove("way")
    assert outside.is_dir() and not os.path.lexists(root / "way")
    # A planted name cannot be the temporary file: each one is new and random.
    names = {p.name for p in root.iterdir()}
    writer.write("sub/g", b"g")
    assert {p.name for p in (root / "sub").iterdir()} == {"g"}
    assert {p.name for p in root.iterdir()} == names
