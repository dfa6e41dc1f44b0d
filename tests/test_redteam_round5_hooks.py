"""Trusted hooks that reach what a confined command wrote, spelt as hook authors spell
them (``codemode.hooks.script_scan``, ``project_runners``): a program whose ``-f FILE``
is its program (``awk -f``, ``sed -f``, ``jq -f``), a workspace file given bare to an
interpreter (``sh configure``, ``perl Makefile.PL``), files another command lists run
by ``xargs bash`` or ``find -exec``, tools that run the project's code (``terraform``,
``gmake``, ``pip``...), and toolchain proxies: a version manager's shim or rustup's
``rustfmt`` run what the workspace's ``.tool-versions`` or ``rust-toolchain.toml``
names. Each such hook runs confined. Evidence of an escape, end to end, is a file in
codemode's home, which no confined command may write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hooks_support import confined_reasons, hooks_table, run_session, write_hooks

from codemode.hooks.discovery import discover
from codemode.hooks.trust import TrustStore


@pytest.fixture(autouse=True)
def _home_env(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("CODEMODE_HOME", str(home))


def _trusted(home: Path, work: Path, script: str, command: str) -> TrustStore:
    folder = work / ".codemode" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fmt.sh").write_text(script)
    write_hooks(home / "hooks.json", hooks_table("PreModelRequest", command))
    store = TrustStore(home, work)
    store.trust(discover(work, home).hooks)
    return store


def _confined(
    home: Path, work: Path, script: str, command: str = "sh .codemode/hooks/fmt.sh"
) -> list[str]:
    """Why the hook runs confined, as the engine decides it (its command's programs, then
    what its trusted scripts start); empty: it runs on the host."""
    store = _trusted(home, work, script, command)
    return confined_reasons(home, work, store)


SCRIPT_LINES = {
    "awk_f": ("awk -f fix.awk notes.txt", {"fix.awk": "{ print }\n"}),
    "sed_f": ("sed -i -f fix.sed notes.txt", {"fix.sed": "s/a/b/\n"}),
    "jq_f": ("jq -f answer.jq", {"answer.jq": ".\n"}),
    "sh_bare": ("sh configure", {"configure": "true\n"}),
    "perl_upper": ("perl Makefile.PL", {"Makefile.PL": "1;\n"}),
    "php_bare": ("php artisan lint", {"artisan": "<?php\n"}),
    "xargs_bash": ("git ls-files scripts | xargs -n1 bash", {}),
    "find_exec_sh": ("find hooks_src -type f -exec bash {} +", {}),
    "find_exec_bare": ("find bin -type f -exec {} \\;", {}),
    "terraform": ("terraform validate", {}),
    "gmake": ("gmake fmt", {}),
    "pip": ("pip install -r requirements.txt", {}),
}


@pytest.mark.parametrize("case", sorted(SCRIPT_LINES))
def test_a_trusted_script_reaching_workspace_code_runs_confined(
    case: str, home: Path, work: Path
) -> None:
    line, files = SCRIPT_LINES[case]
    for rel, text in files.items():
        (work / rel).write_text(text)
    said = _confined(home, work, line + "\n")
    assert said, f"`{line}` in a trusted script would run on the host"


def _shim_folder(tmp_path: Path) -> Path:
    """A version manager's ``shims/`` (as asdf's and mise's are): ``fmt-tool`` runs the
    program the working folder's ``.tool-versions`` names by ``path:``, else its own."""
    shims = tmp_path / "vm" / "shims"
    shims.mkdir(parents=True)
    shim = shims / "fmt-tool"
    shim.write_text(
        "#!/bin/sh\n"
        "dir=$(sed -n 's/^fmt-tool path://p' .tool-versions 2>/dev/null)\n"
        'if [ -n "$dir" ]; then exec "$dir/fmt-tool" "$@"; fi\n'
        "echo formatted >> ran.txt\n"
    )
    shim.chmod(0o755)
    return shims


def test_a_version_managers_shim_is_a_project_tool(
    tmp_path: Path, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shims = _shim_folder(tmp_path)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    assert any("shim" in n for n in _confined(home, work, "", "fmt-tool --check"))


def test_a_shim_the_trusted_script_runs_is_a_project_tool(
    tmp_path: Path, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shims = _shim_folder(tmp_path)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    assert any("shim" in n for n in _confined(home, work, "fmt-tool --check\n"))


def test_a_shim_hook_runs_the_workspaces_program_confined(
    tmp_path: Path, home: Path, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: the program writes ``.tool-versions`` naming its own ``fmt-tool``;
    the trusted hook ``fmt-tool`` (a shim) runs it, in the sandbox."""
    shims = _shim_folder(tmp_path)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    pwned = home / "pwned"
    _trusted(home, work, "", "fmt-tool --check")
    plant = (
        f"mkdir -p evil && printf '#!/bin/sh\\ntouch {pwned}; echo evil >> ran.txt\\n' "
        "> evil/fmt-tool && chmod +x evil/fmt-tool && "
        f"echo 'fmt-tool path:{work}/evil' > .tool-versions"
    )
    code = f"await tools.shell({{command: {plant!r}}});\n"
    model = [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]
    run = run_session(home, work, model)
    assert run.result.ok, run.notices()
    assert (work / "ran.txt").read_text() == "formatted\nevil\n", run.notices()
    assert not pwned.exists(), "the program a shim chose from the workspace ran on the host"


def test_an_ordinary_script_still_runs_on_the_host(home: Path, work: Path) -> None:
    """What these checks add must not confine a plain hook: no tool, no workspace file."""
    assert _confined(home, work, 'rm -f out.txt\necho "python is great"\n') == []


def test_a_file_a_command_makes_after_the_first_run_is_seen_at_the_next(
    home: Path, work: Path
) -> None:
    """What the scan finds in the workspace can change between two runs of a hook: its
    script runs ``sh configure`` when there is one, and there was none at the first run
    (before the first model request). The program then writes ``configure``; the run
    before the next request must see it (an answer of "nothing found" is not kept)."""
    pwned = home / "pwned"
    _trusted(home, work, "[ -f configure ] && sh configure\necho ok >> ran.txt\n",
             "sh .codemode/hooks/fmt.sh")  # fmt: skip
    plant = f"printf 'touch {pwned}\\necho evil >> ran.txt\\n' > configure"
    code = f"await tools.shell({{command: {plant!r}}});\n"
    model = [{"tool_calls": [{"name": "exec", "arguments": {"code": code}}]}, {"text": "done"}]
    run = run_session(home, work, model)
    assert run.result.ok, run.notices()
    assert "evil" in (work / "ran.txt").read_text(), run.notices()
    assert not pwned.exists(), "a file the program wrote after the first run ran on the host"
