"""Programs that select code from the repository are not printers (issue 26, item 4).

An ``allow`` holds only for the program a name resolves to outside the writable roots,
and a version or help query of a toolchain proxy (rustup, yarn, corepack, version-manager
shims, wrapper scripts) is ``prompt``: files of the repository choose what it runs.
Each case is judged with a PATH built for it, holding real files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codemode.sandbox.execpolicy.policy import Policy, PolicyContext
from codemode.sandbox.execpolicy.rules import PrefixRule

SYSTEM = "/usr/local/bin:/usr/bin:/bin"


def _program(path: Path, text: str = "#!/bin/sh\necho fake\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def judge(
    command: str, ws: Path, home: Path, path: str, policy: Policy | None = None
) -> tuple[str, str]:
    ctx = PolicyContext(cwd=ws, writable_roots=(ws,), home=home, path=path)
    ev = (policy or Policy()).evaluate(command, ctx)
    d = ev.deciding
    return ev.decision, f"{d.rule} / {d.justification}" if d else ""


def _needs(*names: str) -> None:
    for n in names:
        if shutil.which(n, path=SYSTEM) is None:
            pytest.skip(f"{n} is not installed in {SYSTEM}: nothing to compare with")


@pytest.mark.parametrize("entry", ["{ws}/bin", "bin", "", "."])
def test_a_name_found_in_the_workspace_is_not_the_program_allowed(
    ws: Path, home: Path, entry: str
) -> None:
    _needs("ls")
    _program(ws / "bin" / "ls")
    _program(ws / "ls")
    path = entry.format(ws=ws) + ":" + SYSTEM
    decision, why = judge("ls", ws, home, path)
    assert decision == "prompt", why
    assert "in the writable roots" in why, why
    assert judge("ls", ws, home, SYSTEM)[0] == "allow"


def test_a_rewritten_venv_pip_is_not_pip(ws: Path, home: Path, tmp_path: Path) -> None:
    _needs("python3")
    venv = ws / ".venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(shutil.which("python3", path=SYSTEM) or "", venv / "python3")
    _program(venv / "pip")
    path = f"{venv}:{SYSTEM}"
    for command in ("python3 --version", "pip --version"):
        decision, why = judge(command, ws, home, path)
        assert decision == "prompt" and "writable roots" in why, (command, why)
    for command in (".venv/bin/pip --version", f"{venv}/python3 -V"):
        decision, why = judge(command, ws, home, path)
        assert decision != "allow", (command, why)


def test_a_users_allow_rule_holds_only_for_the_program_outside(ws: Path, home: Path) -> None:
    policy = Policy()
    policy.add_user_rule(PrefixRule(pattern=(("mytool",),), decision="allow", source="t",
                                    layer="user"))  # fmt: skip
    outside = _program(home.parent / "opt" / "mytool")
    assert judge("mytool run", ws, home, f"{outside.parent}:{SYSTEM}", policy)[0] == "allow"
    _program(ws / "bin" / "mytool")
    decision, why = judge("mytool run", ws, home, f"{ws}/bin:{outside.parent}", policy)
    assert decision == "prompt" and "writable roots" in why, why


@pytest.mark.parametrize(
    "command", ["cargo --version", "cargo -V", "rustc -V", "rustc --version", "rustup --version"]
)
def test_rustups_proxies_are_not_printers(
    ws: Path, home: Path, tmp_path: Path, command: str
) -> None:
    cargo_bin = tmp_path / "dot-cargo" / "bin"
    rustup = _program(cargo_bin / "rustup")
    for name in ("cargo", "rustc"):
        os.link(rustup, cargo_bin / name)  # as rustup installs them: hard links
    decision, why = judge(command, ws, home, f"{cargo_bin}:{SYSTEM}")
    if command.startswith("rustup"):  # in no table: unmatched, asked under untrusted
        assert decision == "unmatched", why
        return
    assert decision == "prompt", why
    assert "rust-toolchain.toml" in why, why


def test_a_plain_cargo_is_still_a_printer(ws: Path, home: Path, tmp_path: Path) -> None:
    plain = _program(tmp_path / "debian" / "cargo")
    assert judge("cargo --version", ws, home, f"{plain.parent}:{SYSTEM}")[0] == "allow"


def test_yarn_is_never_a_printer(ws: Path, home: Path, tmp_path: Path) -> None:
    yarn = _program(tmp_path / "node" / "bin" / "yarn")
    decision, why = judge("yarn --version", ws, home, f"{yarn.parent}:{SYSTEM}")
    assert decision == "prompt" and "yarnPath" in why, why


@pytest.mark.parametrize("name", ["pnpm", "npm"])
def test_corepack_shims_are_not_printers(ws: Path, home: Path, tmp_path: Path, name: str) -> None:
    target = _program(tmp_path / "lib" / "node_modules" / "corepack" / "dist" / f"{name}.js")
    bin_dir = tmp_path / "node" / "bin"
    bin_dir.mkdir(parents=True)
    os.symlink(target, bin_dir / name)
    decision, why = judge(f"{name} --version", ws, home, f"{bin_dir}:{SYSTEM}")
    assert decision == "prompt" and "corepack" in why, why


@pytest.mark.parametrize(
    ("manager", "name"),
    [(".pyenv/shims", "python3"), (".asdf/shims", "node"), (".local/share/mise/shims", "go")],
)
def test_version_manager_shims_are_not_printers(
    ws: Path, home: Path, tmp_path: Path, manager: str, name: str
) -> None:
    shim = _program(tmp_path / manager / name, '#!/bin/sh\nexec manager exec "$@"\n')
    decision, why = judge(f"{name} --version", ws, home, f"{shim.parent}:{SYSTEM}")
    assert decision == "prompt" and "shim" in why, why


def test_volta_shims_are_not_printers(ws: Path, home: Path, tmp_path: Path) -> None:
    real = _program(tmp_path / ".volta" / "bin" / "volta-shim")
    os.symlink(real, real.parent / "node")
    decision, why = judge("node --version", ws, home, f"{real.parent}:{SYSTEM}")
    assert decision == "prompt" and "volta" in why, why


@pytest.mark.parametrize("command", ["./gradlew --version", "./mvnw -v", "sh gradlew --help"])
def test_wrapper_scripts_of_the_repository_are_not_printers(
    ws: Path, home: Path, command: str
) -> None:
    _program(ws / "gradlew")
    _program(ws / "mvnw")
    decision, why = judge(command, ws, home, SYSTEM)
    assert decision != "allow", why


REAL_PATH = os.environ.get("PATH", "")  # read at import, before the fixtures pin PATH


async def test_a_rust_toolchain_file_cannot_run_the_repositorys_cargo(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The red team's case, for real where rustup is installed: rust-toolchain.toml
    `path = ".../tc"` makes `cargo --version` run tc/bin/cargo. Under --approval untrusted
    with no one to approve, it is refused instead of run."""
    import subprocess

    from codemode.errors import ToolError
    from codemode.sandbox.session import SandboxSession
    from codemode.sandbox.settings import SandboxSettings
    from codemode.tools import ToolContext, builtin_registry

    cargo = shutil.which("cargo", path=REAL_PATH)
    if cargo is None or shutil.which("rustup", path=REAL_PATH) is None:
        pytest.skip("rustup is not installed here: no proxy to attack")
    monkeypatch.setenv("PATH", REAL_PATH)
    mark = ws / "MARK"  # (writable: a sandboxed run could make it too)
    (ws / "rust-toolchain.toml").write_text(f'[toolchain]\npath = "{ws / "tc"}"\n')
    (ws / "tc" / "lib").mkdir(parents=True)
    for name in ("cargo", "rustc"):
        _program(ws / "tc" / "bin" / name, f"#!/bin/sh\ntouch {mark}\necho 'cargo 0'\n")
    # the attack is real: run on the host, rustup runs the repository's program
    subprocess.run([cargo, "--version"], cwd=ws, capture_output=True, timeout=60)
    if not mark.exists():
        pytest.skip("this rustup does not honour toolchain paths: nothing to refuse")
    mark.unlink()
    s = SandboxSession(ws, SandboxSettings(approval_policy="untrusted"))
    try:
        for command in ("cargo --version", "rustc -V"):
            with pytest.raises(ToolError, match="needs approval"):
                await builtin_registry().invoke(
                    "shell", {"command": command}, ToolContext(workspace=ws, sandbox=s)
                )
    finally:
        s.close()
    assert not mark.exists()
