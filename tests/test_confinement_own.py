"""codemode's own state and installation cannot be changed from inside the sandbox.

The attack from issue 26: with the workspace set to the home folder, a command renamed
``~/.cache/codemode`` (or ``~/.cache``) aside and made a fresh ``helpers/`` holding its
own ``dropcaps``; the next session ran it as root. Each test here attacks for real, as
root and as nobody, with bubblewrap (command server on and off) and with Landlock.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from codemode.sandbox.confinement import bwrap
from codemode.sandbox.confinement.confine import probe
from codemode.sandbox.helpers import compiled
from codemode.sandbox.protection import own_paths
from codemode.sandbox.protection.paths import write_refusal
from tests.confinement_support import give, run_shell, shared_dir, skip_unless

__all__ = ["shared_dir"]  # the fixture, used by name

USERS = ["self", "nobody"]
BWRAP_MODES = [{"backend": "bubblewrap", "command_server": True},
               {"backend": "bubblewrap", "command_server": False}]  # fmt: skip


def _home_env(home: Path) -> dict[str, str]:
    # the defaults: ~/.codemode and ~/.cache/codemode (empty means unset)
    return {"HOME": str(home), "CODEMODE_HOME": "", "CODEMODE_CACHE": "",
            "XDG_CACHE_HOME": "", "XDG_CONFIG_HOME": ""}  # fmt: skip


@pytest.mark.parametrize("mode", BWRAP_MODES, ids=["server", "no-server"])
@pytest.mark.parametrize("user", USERS)
def test_planted_helpers_through_renamed_parents_never_reach_the_host(
    shared_dir: Path, user: str, mode: dict[str, object]
) -> None:
    skip_unless(user, "bubblewrap")
    home = shared_dir / "home"
    (home / ".cache" / "codemode" / "helpers").mkdir(parents=True)
    (home / ".codemode").mkdir()
    (home / "project").mkdir()
    give(shared_dir, user)
    caches = home / ".cache"
    before = [os.stat(p).st_ino for p in (caches, caches / "codemode", home / ".codemode")]
    name = compiled.name("dropcaps.c")
    plant = (
        "mkdir -p {d}/codemode/helpers && printf evil > {d}/codemode/helpers/" + name + " && "
        "chmod 755 {d}/codemode/helpers/" + name
    )
    command = " ; ".join([
        f"mv {caches} {home}/cache-aside", plant.format(d=caches),
        f"mv {caches}/codemode {home}/cm-aside", plant.format(d=caches),
        f"rm -rf {caches}/codemode/helpers", plant.format(d=caches),
        f"mv {home}/.codemode {home}/home-aside", f"mkdir -p {home}/.codemode/rules",
        f"echo 'prefix_rule(pattern=[\"rm\"], decision=\"allow\")' "
        f"> {home}/.codemode/rules/x.rules",
        "echo end",
    ])  # fmt: skip
    r = run_shell(user, home, command, extra_env=_home_env(home), **mode)
    out = r["output"]
    assert "end" in out.splitlines(), out
    # (mv falls back to copying a folder it cannot rename: a copy is harmless)
    assert [os.stat(p).st_ino for p in (caches, caches / "codemode", home / ".codemode")] == before
    assert not (caches / "codemode" / "helpers" / name).exists() or (
        (caches / "codemode" / "helpers" / name).read_bytes() != b"evil"
    ), out
    assert not (home / ".codemode" / "rules" / "x.rules").exists(), out


@pytest.mark.parametrize("user", USERS)
def test_landlock_refuses_a_root_holding_codemodes_state_and_says_why(
    shared_dir: Path, user: str
) -> None:
    skip_unless(user, "landlock")
    home = shared_dir / "home"
    (home / ".codemode").mkdir(parents=True)
    give(shared_dir, user)
    r = run_shell(user, home, "touch x; echo ran", extra_env=_home_env(home), backend="landlock")
    out = r["output"]
    assert "ran" not in out and not (home / "x").exists(), out
    assert "Landlock cannot keep read-only" in out and ".codemode" in out, out


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
@pytest.mark.parametrize("user", USERS)
def test_a_root_inside_codemodes_home_is_refused(shared_dir: Path, user: str, backend: str) -> None:
    skip_unless(user, backend)
    ws = shared_dir / "cm" / "project"
    ws.mkdir(parents=True)
    give(shared_dir, user)
    env = {"CODEMODE_HOME": str(shared_dir / "cm")}
    r = run_shell(user, ws, "touch ../config.toml; echo ran", extra_env=env, backend=backend)
    assert "ran" not in r["output"] and not (shared_dir / "cm" / "config.toml").exists()
    assert "is inside codemode's home" in r["output"], r["output"]


def test_codemode_home_with_a_tilde_is_the_same_folder_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.locations.config_file import codemode_home
    from codemode.sandbox.execpolicy import policy

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEMODE_HOME", "~/cm")
    monkeypatch.setenv("CODEMODE_CACHE", "~/cache")
    assert codemode_home() == policy.codemode_home() == tmp_path / "cm"
    assert compiled.helpers_dir() == tmp_path / "cache" / "helpers"
    paths = {o.path for o in own_paths.own_paths()}
    assert {tmp_path / "cm", tmp_path / "cache"} <= paths
    # a file tool cannot write there either
    why = write_refusal(tmp_path / "cm" / "rules" / "x.rules", [tmp_path])
    assert why is not None and "codemode's home" in why


def test_the_installation_is_codemodes_own() -> None:
    import codemode

    paths = {o.path for o in own_paths.own_paths()}
    assert Path(codemode.__file__).resolve().parent in paths
    assert Path(sys.prefix) in paths


@pytest.mark.parametrize("mode", [*BWRAP_MODES, {"backend": "landlock"}],
                         ids=["server", "no-server", "landlock"])  # fmt: skip
def test_the_real_package_and_environment_are_read_only_or_refused(
    mode: dict[str, object],
) -> None:
    """A workspace holding codemode's own checkout (an editable install): no command
    writes the package or the environment codemode runs from."""
    import codemode

    backend = str(mode["backend"])
    if (why := getattr(probe(), backend)) is not None:
        pytest.skip(f"{backend}: {why}")
    package = Path(codemode.__file__).resolve().parent
    ws = package.parent
    marker = f"planted-{os.getpid()}-{backend}-{mode.get('command_server')}"
    targets = [package / marker, Path(sys.prefix) / marker]
    if not Path(sys.prefix).is_relative_to(ws):
        targets = targets[:1]
    command = "; ".join(f"touch {t}" for t in targets) + "; echo end"
    try:
        r = run_shell("self", ws, command, extra_env={"HOME": str(ws)}, **mode)
        assert not any(t.exists() for t in targets), r["output"]
        if own_paths.root_refusal(ws, "bubblewrap") is not None:
            # an installed (not editable) codemode: the folder is inside the environment
            assert "is inside the Python environment" in r["output"], r["output"]
        elif backend == "landlock":
            assert "Landlock cannot keep read-only" in r["output"], r["output"]
        else:
            assert "end" in r["output"], r["output"]
    finally:
        for t in targets:
            if t.exists():
                t.unlink()


def test_a_symlinked_dotfile_is_protected_as_link_and_target(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_unless("self", "bubblewrap")
    home = shared_dir / "home"
    (home / "dotfiles").mkdir(parents=True)
    target = home / "dotfiles" / "gitconfig"
    target.write_text("[user]\n\tname = me\n")
    (home / ".gitconfig").symlink_to("dotfiles/gitconfig")
    command = (
        f"echo '[core] fsmonitor = evil' >> {home}/.gitconfig; "
        f"echo '[core] fsmonitor = evil' >> {target}; "
        f"rm {home}/.gitconfig; printf '[core]\\n\\tfsmonitor = evil\\n' > {home}/.gitconfig; "
        "echo end"
    )
    r = run_shell("self", home, command, extra_env=_home_env(home))
    assert "end" in r["output"], r["output"]
    assert target.read_text() == "[user]\n\tname = me\n", r["output"]
    assert (home / ".gitconfig").is_symlink(), r["output"]
    assert os.readlink(home / ".gitconfig") == "dotfiles/gitconfig"
    assert "put back" in r["output"], r["output"]
    # and the file tools refuse both
    for k, v in _home_env(home).items():
        monkeypatch.setenv(k, v)
    assert write_refusal(home / ".gitconfig", [home]) is not None
    assert write_refusal(target, [home]) is not None


def test_a_helper_changed_after_this_process_built_it_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_CACHE", str(tmp_path / "cache"))
    exe = compiled.path("subreaper.c")
    if exe is None:
        pytest.skip("no C compiler here: no helper to check")
    assert compiled.verified(Path(exe)) == exe
    data = Path(exe).read_bytes()
    Path(exe).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same owner, same mode
    assert compiled.path("subreaper.c") is None
    Path(exe).write_bytes(data)  # even put back: it was swapped once
    assert compiled.path("subreaper.c") is None


def test_the_bubblewrap_probe_runs_under_the_seccomp_filter() -> None:
    """The probe that runs the helper runs it as a command runs: no Unix sockets."""
    if (why := probe().bubblewrap) is not None:
        pytest.skip(f"bubblewrap: {why}")
    if (why := probe().seccomp) is not None:
        pytest.skip(f"seccomp: {why}")
    exe = bwrap.executable()
    assert exe is not None
    opts, prefix = bwrap.isolation()
    base = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *opts]
    code = "import socket; socket.socket(socket.AF_UNIX); print('opened')"
    p = bwrap._run_filtered(base, [*prefix, sys.executable, "-I", "-c", code])
    assert "opened" not in p.stdout and p.returncode != 0, (p.stdout, p.stderr)
    p = bwrap._run_filtered(base, [*prefix, "true"])
    assert p.returncode == 0, p.stderr


def test_host_programs_are_never_taken_from_a_writable_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.locations import host_programs
    from codemode.sandbox.git.host_git import git_argv
    from codemode.sandbox.session import SandboxSession

    ws = tmp_path / "ws"
    for name in ("git", "bwrap", "cc"):
        p = ws / "bin" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\ntouch /tmp/planted\n")
        p.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(ws / "bin" / "git", elsewhere / "git")  # a link outside leading in
    monkeypatch.setenv("PATH", f"bin:{ws}/bin:{elsewhere}:/usr/bin:/bin")
    monkeypatch.setenv("CODEMODE_HOME", str(tmp_path / "home"))
    s = SandboxSession(ws)
    try:
        for name in ("git", "bwrap", "cc"):
            found = host_programs.host_program(name)
            assert found is None or not found.startswith(str(tmp_path)), found
        assert not git_argv("status")[0].startswith(str(tmp_path))
    finally:
        s.close()
    # Once no session holds the folder, what its commands wrote is still there: it stays
    # refused (recorded in the codemode home), in this process and in any later one.
    assert host_programs.host_program("git", f"{ws}/bin") is None
    recorded = (tmp_path / "home" / "writable-roots").read_text().splitlines()
    assert str(ws.resolve()) in recorded


def test_a_helper_that_keeps_capabilities_fails_the_probe(tmp_path: Path) -> None:
    """A `dropcaps` that runs the command without dropping anything (planted with a
    record, by anything outside codemode) is found out by the probe, which
    checks what it starts holds no capability, and setpriv is used instead."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("dropcaps is only used as root; the tests do not run as root")
    if (why := probe().bubblewrap) is not None:
        pytest.skip(f"bubblewrap: {why}")
    cache = tmp_path / "cache"
    folder = cache / "helpers"
    folder.mkdir(parents=True, mode=0o700)
    cache.chmod(0o700)
    fake = folder / compiled.name("dropcaps.c")
    fake.write_text('#!/bin/sh\nexec "$@"\n')  # keeps CAP_SETPCAP and the bounding set
    fake.chmod(0o755)
    # with a record of its own (what only a process with the user's full authority
    # could write): the digest check passes, so it is the probe that must refuse it
    digest = hashlib.sha256(fake.read_bytes()).hexdigest()
    compiled.record_path(fake).write_bytes(compiled.record("dropcaps.c", digest, "planted"))
    code = (
        "from codemode.sandbox.confinement import bwrap; print(bwrap.available()); "
        "print(bwrap._helper_allowed); print(bwrap.isolation()[1])"
    )
    env = {**os.environ, "CODEMODE_CACHE": str(cache)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    lines = p.stdout.splitlines()
    assert lines[:2] == ["None", "False"], (p.stdout, p.stderr)
    assert str(fake) not in lines[2], lines
