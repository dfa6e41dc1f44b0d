"""A workspace that contains the home keeps what the user's other programs run or trust.

The attack (issues 26 and 38): with the home folder as the workspace, a confined command
wrote ``~/.local/bin/{bwrap,git}`` (found first on PATH by the next session, in another
folder, and run on the host), shell start-up files, ``~/.ssh/authorized_keys`` and other
agents' settings and hooks (``~/.claude/settings.json``, ``~/.codex/hooks.json``). Each
test attacks for real through a ``SandboxSession``, as root and as uid 65534 where the
machine allows, with bubblewrap (command server on and off) and Landlock.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codemode.sandbox.protection.paths import write_refusal
from tests.confinement_support import give, run_shell, shared_dir, skip_unless

__all__ = ["shared_dir"]

USERS = ["self", "nobody"]
BWRAP_MODES = [{"backend": "bubblewrap", "command_server": True},
               {"backend": "bubblewrap", "command_server": False}]  # fmt: skip

# What the home holds before the attack (path relative to the home -> text).
EXISTING = {
    ".bashrc": "# bashrc\n",
    ".profile": "# profile\n",
    ".zshrc": "# zshrc\n",
    ".ssh/authorized_keys": "ssh-ed25519 AAAA mine\n",
    ".ssh/config": "Host *\n",
    ".gitconfig": "[user]\n\tname = me\n",
    ".config/git/config": "[core]\n",
    ".config/nvim/init.lua": "-- mine\n",
    ".config/fish/config.fish": "# fish\n",
    ".claude/settings.json": "{}\n",
    ".codex/hooks.json": "{}\n",
    "codex-home/config.toml": "# CODEX_HOME\n",
    "tools/bin/fmt": "#!/bin/sh\n",
    ".local/bin/keep": "#!/bin/sh\n",
}
# What must not appear (a PATH folder that is absent, files read when present).
ABSENT = [".bash_profile", ".zshenv", ".local/bin/git", ".local/bin/bwrap", "bin/git",
          "tools/bin/bwrap", ".claude.json", ".config/autostart/x.desktop",
          "codex-home/hooks.json"]  # fmt: skip


def _make_home(shared: Path) -> Path:
    home = shared / "home"
    for rel, text in EXISTING.items():
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (home / "tools" / "bin" / "fmt").chmod(0o755)
    # a dotfile kept elsewhere in the home and linked (GNU stow's way)
    (home / "dotfiles" / "vim").mkdir(parents=True)
    (home / "dotfiles" / "vim" / "vimrc").write_text("set nocompatible\n")
    (home / ".vimrc").symlink_to("dotfiles/vim/vimrc")
    # and a link deeper in a dot-folder, to a file elsewhere in the home
    (home / "dotfiles" / "nvim").mkdir()
    (home / "dotfiles" / "nvim" / "plugin.lua").write_text("-- plugin\n")
    (home / ".config" / "nvim" / "plugin.lua").symlink_to(home / "dotfiles/nvim/plugin.lua")
    return home


def _env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home), "CODEMODE_HOME": "", "CODEMODE_CACHE": "", "XDG_CACHE_HOME": "",
        "XDG_CONFIG_HOME": "", "CODEX_HOME": str(home / "codex-home"),
        "PATH": f"{home}/.local/bin:{home}/bin:{home}/tools/bin:/usr/local/bin:/usr/bin:/bin",
    }  # fmt: skip


def _attack(home: Path) -> str:
    writes = [f"echo evil >> {home}/{rel}" for rel in EXISTING]
    creates = [f"mkdir -p $(dirname {home}/{rel}); echo evil > {home}/{rel}; "
               f"chmod 755 {home}/{rel}" for rel in ABSENT]  # fmt: skip
    swaps = [
        f"mv {home}/.ssh {home}/ssh-aside && mkdir {home}/.ssh && "
        f"echo evil > {home}/.ssh/authorized_keys",
        f"rm -f {home}/.bashrc; echo evil > {home}/.bashrc",
        f"mv {home}/.config {home}/config-aside; mkdir -p {home}/.config/git; "
        f"echo evil > {home}/.config/git/config",
        f"echo evil >> {home}/dotfiles/vim/vimrc",
        f"echo evil >> {home}/dotfiles/nvim/plugin.lua",
        f"mv {home}/dotfiles {home}/dotfiles-aside; mkdir -p {home}/dotfiles/vim; "
        f"echo evil > {home}/dotfiles/vim/vimrc",
        f"rm -f {home}/.vimrc; ln -s notes.txt {home}/.vimrc",
    ]
    allowed = [f"echo mine > {home}/notes.txt", f"mkdir -p {home}/.cache/x && echo c > "
               f"{home}/.cache/x/y"]  # fmt: skip
    return " ; ".join([*writes, *creates, *swaps, *allowed, "echo end"])


def _check(home: Path, out: str) -> None:
    assert "end" in out.splitlines(), out
    for rel, text in EXISTING.items():
        assert (home / rel).read_text() == text, (rel, out)
    for rel in ABSENT:
        assert not os.path.lexists(home / rel), (rel, out)
    assert os.readlink(home / ".vimrc") == "dotfiles/vim/vimrc", out
    assert (home / ".vimrc").read_text() == "set nocompatible\n", out
    assert (home / "dotfiles" / "nvim" / "plugin.lua").read_text() == "-- plugin\n", out
    # the rest of the home is the workspace: written as asked
    assert (home / "notes.txt").read_text() == "mine\n", out
    assert (home / ".cache" / "x" / "y").read_text() == "c\n", out


@pytest.mark.parametrize("mode", BWRAP_MODES, ids=["server", "no-server"])
@pytest.mark.parametrize("user", USERS)
def test_a_home_workspace_keeps_what_other_programs_run_or_trust(
    shared_dir: Path, user: str, mode: dict[str, object]
) -> None:
    skip_unless(user, "bubblewrap")
    home = _make_home(shared_dir)
    give(shared_dir, user)
    r = run_shell(user, home, _attack(home), extra_env=_env(home), **mode)
    _check(home, r["output"])


@pytest.mark.parametrize("user", USERS)
def test_a_workspace_above_the_home_keeps_it_too(shared_dir: Path, user: str) -> None:
    """The root contains the home (``/home``, ``/``): the same rule, and the home
    itself cannot be renamed aside and replaced."""
    skip_unless(user, "bubblewrap")
    home = _make_home(shared_dir)
    give(shared_dir, user)
    attack = (
        f"mv {home} {shared_dir}/home-aside; mkdir -p {home}/.local/bin; "
        f"echo evil > {home}/.local/bin/git; echo evil >> {home}/.bashrc; echo end"
    )
    r = run_shell(user, shared_dir, attack, extra_env=_env(home))
    out = r["output"]
    assert "end" in out.splitlines(), out
    assert not (shared_dir / "home-aside").exists(), out
    assert (home / ".bashrc").read_text() == EXISTING[".bashrc"], out
    assert not (home / ".local" / "bin" / "git").exists(), out


@pytest.mark.parametrize("user", USERS)
def test_a_later_session_elsewhere_does_not_run_what_a_home_session_planted(
    shared_dir: Path, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Session one, in the home, plants ``bwrap`` and ``git`` first on PATH; session two,
    in another folder (no session holds the home any more), looks them up."""
    skip_unless(user, "bubblewrap")
    from codemode.locations import host_programs

    home = _make_home(shared_dir)
    give(shared_dir, user)
    plant = " ; ".join(
        f"mkdir -p {home}/{d} && printf '#!/bin/sh\\necho planted\\n' > {home}/{d}/{n} && "
        f"chmod 755 {home}/{d}/{n}"
        for d in (".local/bin", "bin", "tools/bin") for n in ("bwrap", "git")
    ) + " ; echo end"  # fmt: skip
    r = run_shell(user, home, plant, extra_env=_env(home))
    assert "end" in r["output"].splitlines(), r["output"]
    monkeypatch.setenv("PATH", _env(home)["PATH"])
    for name in ("bwrap", "git"):
        found = host_programs.host_program(name)
        assert found is None or not found.startswith(str(home)), (found, r["output"])


@pytest.mark.parametrize("user", USERS)
def test_landlock_refuses_a_home_workspace_and_says_why(shared_dir: Path, user: str) -> None:
    """Landlock cannot keep part of a root read-only: a root holding the home's
    start-up files is refused (codemode's own folders elsewhere, so they are not why)."""
    skip_unless(user, "landlock")
    home = _make_home(shared_dir)
    # (no git configuration either: codemode refused a root holding that already)
    (home / ".gitconfig").unlink()
    (home / ".config" / "git" / "config").unlink()
    (home / ".config" / "git").rmdir()
    give(shared_dir, user)
    env = {**_env(home), "CODEMODE_HOME": str(shared_dir / "cm"),
           "CODEMODE_CACHE": str(shared_dir / "cm-cache")}  # fmt: skip
    r = run_shell(user, home, f"echo evil >> {home}/.bashrc; echo ran", extra_env=env,
                  backend="landlock")  # fmt: skip
    out = r["output"]
    assert "ran" not in out and (home / ".bashrc").read_text() == EXISTING[".bashrc"], out
    assert "Landlock cannot keep read-only" in out, out


def test_the_file_tools_refuse_the_same_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _make_home(tmp_path)
    for k, v in _env(home).items():
        monkeypatch.setenv(k, v) if v else monkeypatch.delenv(k, raising=False)
    for rel in [*EXISTING, *ABSENT]:
        why = write_refusal(home / rel, [home])
        assert why is not None, rel
    assert write_refusal(home / "dotfiles" / "nvim" / "plugin.lua", [home]) is not None
    for rel in ("notes.txt", ".cache/x/y", "project/.bashrc", "dotfiles/nvim/other.lua"):
        assert write_refusal(home / rel, [home]) is None, rel
    # a workspace inside the home is not the home: its own dotfiles are the project's
    assert write_refusal(home / "project" / ".profile", [home / "project"]) is None


def test_the_rules_cover_what_they_say_and_nothing_of_a_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.sandbox.protection import user_trust

    home = _make_home(tmp_path)
    for k, v in _env(home).items():
        monkeypatch.setenv(k, v) if v else monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ZDOTDIR", str(tmp_path / "zdot"))  # outside the home
    monkeypatch.setenv("PATH", f"{home}/tools/bin:relative/bin:{home}/.cargo/bin:/usr/bin")
    kept = dict(user_trust.trusted([home]))
    assert kept[home / ".bashrc"] == user_trust.WHAT_DOT
    assert kept[home / "tools" / "bin"] == user_trust.WHAT_PATH
    assert kept[home / "bin"] == user_trust.WHAT_PATH  # .profile's, absent
    assert "$CODEX_HOME" in kept[home / "codex-home"]
    assert home / ".cache" not in kept and home / "notes.txt" not in kept
    assert not any("relative" in str(p) for p in kept)
    assert tmp_path / "zdot" not in kept  # not in a root
    assert tmp_path / "zdot" in dict(user_trust.trusted([tmp_path]))
    # a root inside the home: only what the environment names inside it
    assert dict(user_trust.trusted([home / "tools"])) == {}
    assert user_trust.trusted([home / "codex-home"]) == []  # the root itself: allowed
    from codemode.sandbox.protection.own_paths import root_refusal

    assert root_refusal(home / ".config" / "nvim", "bubblewrap") is None
    (home / ".new").mkdir()
    (home / ".old.codemode-refused-1").mkdir()
    new = user_trust.new_entries(home, frozenset(os.listdir(home)) - {".new"})
    assert new == [home / ".new"]
