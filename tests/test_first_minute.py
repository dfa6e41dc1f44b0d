"""A newcomer's first minute: no provider configured (a fresh CODEMODE_HOME, no key in
the environment). `exec` and the interactive session say in a few lines how to set one
up, with flags and config lines that really work, never the whole catalog; a misspelt
provider gets a few close names."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from pathlib import Path

import pexpect
from agent_support import INTERPRETER, CliRun, cli_env

from codemode.providers.catalog import builtin_providers
from codemode_testkit.scripted_server import ScriptedModelServer

CATALOG = builtin_providers()
KEY_VARIABLES = {info.key_variable for info in CATALOG.values() if info.key_variable}
# A first-minute message is short: it was every provider name (125) on one line.
MAX_LINES = 15
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]")
WAIT = 30


def clean(home: Path, **extra: str) -> dict[str, str]:
    """The test's environment with ``home`` as CODEMODE_HOME and without any key
    variable the catalog knows (not only *_API_KEY: GITHUB_TOKEN and the like too)."""
    env = {k: v for k, v in cli_env(home).items() if k not in KEY_VARIABLES}
    return {**env, **extra}


def run_cli(args: list[str], *, home: Path, cwd: Path, stdin: str = "",
            **extra: str) -> CliRun:
    proc = subprocess.run([str(INTERPRETER), *args], input=stdin, capture_output=True,
                          text=True, cwd=cwd, env=clean(home, **extra), timeout=60)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def names_listed(text: str) -> list[str]:
    """The catalog's provider names that ``text`` mentions as words."""
    return [n for n in CATALOG if re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w.-])", text)]


def assert_first_minute(message: str, config: Path) -> None:
    lines = message.strip().splitlines()
    assert 3 <= len(lines) <= MAX_LINES, message
    assert "no model provider configured" in lines[0]
    # a local server by name, another by URL, and a key for a named provider
    assert "--provider llamacpp -m MODEL" in message
    assert "-c model_providers.local.base_url=http://HOST:PORT/v1 --provider local" in message
    assert "export OPENAI_API_KEY=..." in message and "--provider openai" in message
    assert "ANTHROPIC_API_KEY" in message  # the catalog's variable for anthropic
    assert CATALOG["anthropic"].key_variable == "ANTHROPIC_API_KEY"
    assert f"{config}:" in message and 'model_provider = "llamacpp"' in message
    assert "interpreter providers" in message  # where the rest are
    page = re.search(r"more: (docs/[\w-]+\.md)", message)  # where to read more
    assert page and (Path(__file__).resolve().parents[1] / page[1]).is_file(), message
    # a handful of names, not the catalog
    assert len(names_listed(message)) <= 8, names_listed(message)
    assert "302ai" not in message and "zhipuai-coding-plan" not in message


def test_exec_without_a_provider_says_how_to_set_one_up(home: Path, work: Path) -> None:
    run = run_cli(["exec", "hi"], home=home, cwd=work)
    assert run.code == 2, run.stderr  # exec's usage or configuration error
    assert run.stdout == ""
    assert run.stderr.startswith("interpreter exec: error: no model provider configured")
    assert_first_minute(run.stderr, home / "config.toml")
    assert "already set here" not in run.stderr  # no key in this environment
    assert not (home / "config.toml").exists()


def test_the_flags_the_message_shows_work(home: Path, work: Path) -> None:
    """Each way the message names, as written, reaches a model (the scripted server)."""
    message = run_cli(["exec", "hi"], home=home, cwd=work).stderr
    by_url = message.split("at another URL: ", 1)[1].splitlines()[0].strip()
    with ScriptedModelServer([{"text": "by url"}, {"text": "by default"}]) as server:
        flags = shlex.split(by_url.replace("http://HOST:PORT/v1", server.base_url)
                            .replace("MODEL", "test-model"))
        run = run_cli(["exec", *flags, "hi"], home=home, cwd=work)
        assert run.code == 0, run.stderr
        assert "by url" in run.stdout
        # the config lines it shows, with llama-server's port moved to the test's server
        shown = re.findall(r"^\s+(model_provider = .*|model = .*)$", message, re.M)
        assert len(shown) == 2, message
        config = "\n".join(shown).replace("MODEL", "test-model")
        (home / "config.toml").write_text(
            f'{config}\n[model_providers.llamacpp]\nbase_url = "{server.base_url}"\n',
            encoding="utf-8")
        run = run_cli(["exec", "hi"], home=home, cwd=work)
        assert run.code == 0, run.stderr
        assert "by default" in run.stdout
    assert [r.body["model"] for r in server.requests] == ["test-model", "test-model"]


def test_a_key_already_set_is_named(home: Path, work: Path) -> None:
    run = run_cli(["exec", "hi"], home=home, cwd=work, DEEPSEEK_API_KEY="sk-test")
    assert run.code == 2
    assert "already set here: DEEPSEEK_API_KEY (--provider deepseek)" in run.stderr
    assert_first_minute(run.stderr, home / "config.toml")


def test_a_misspelt_provider_gets_a_few_close_names(home: Path, work: Path) -> None:
    run = run_cli(["exec", "--provider", "olama", "hi"], home=home, cwd=work)
    assert run.code == 2
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "unknown provider 'olama' (did you mean" in run.stderr and "ollama" in run.stderr
    assert len(names_listed(run.stderr)) <= 3, run.stderr
    (home / "config.toml").write_text('model_provider = "opnai"\n', encoding="utf-8")
    run = run_cli(["exec", "hi"], home=home, cwd=work)
    assert run.code == 2 and "unknown provider 'opnai' (did you mean openai" in run.stderr


def test_interactive_session_without_a_terminal_says_the_same(home: Path, work: Path) -> None:
    run = run_cli([], home=home, cwd=work, stdin="hi\n")
    assert run.code == 2, run.stdout + run.stderr
    assert run.stderr.startswith("interpreter: error: no model provider configured")
    assert_first_minute(run.stderr, home / "config.toml")


def test_interactive_session_on_a_terminal_offers_a_short_list(home: Path, work: Path) -> None:
    child = pexpect.spawn(
        str(INTERPRETER), [], cwd=str(work),
        env=clean(home, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1"),
        encoding="utf-8", codec_errors="replace", dimensions=(50, 200), timeout=WAIT,
    )
    try:
        child.expect_exact("provider (number or name)")
        shown = ANSI.sub("", child.before or "")
        start = shown.index("No model provider is configured yet")
        lines = [line for line in shown[start:].splitlines() if line.strip()]
        lines = lines[:-1] if lines[-1].strip() == "›" else lines  # the prompt's own mark
        assert len(lines) <= MAX_LINES, "\n".join(lines)
        # a local server with its URL, any other URL, and named providers with their keys
        assert "llamacpp" in shown and CATALOG["llamacpp"].base_url in shown
        assert "another OpenAI-compatible endpoint" in shown
        assert "openai" in shown and "$OPENAI_API_KEY, not set" in shown
        assert "interpreter providers" in shown
        assert len(names_listed(shown)) <= 14, names_listed(shown)
        assert "302ai" not in shown and "dashscope-cn" not in shown
        child.sendcontrol("d")  # no answer: nothing is written
        child.expect(pexpect.EOF)
        said = ANSI.sub("", child.before or "")
    finally:
        deadline = time.monotonic() + WAIT
        while child.isalive() and time.monotonic() < deadline:
            time.sleep(0.1)
        child.close(force=True)
    assert "setup cancelled; nothing written" in said and "--provider NAME -m MODEL" in said
    assert child.exitstatus == 2, (child.exitstatus, said)
    assert not (home / "config.toml").exists()


def test_docs_show_the_message_as_the_program_says_it(home: Path, work: Path) -> None:
    """docs/doctor.md quotes the message whole: it must not drift from the program's
    (the catalog's size, a port, a flag)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "doctor.md").read_text("utf-8")
    section = page.split("## Not set up yet", 1)[1]
    quoted = section.split("```text\n", 1)[1].split("```", 1)[0]
    run = run_cli(["exec", "hi"], home=home, cwd=work)
    said = run.stderr.replace(str(home / "config.toml"), "/home/me/.codemode/config.toml")
    assert quoted == said
