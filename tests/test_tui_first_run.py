"""First contact in a real pseudo-terminal: a provider whose key is not set is one line
naming the variable, then fixed in the session (a key for this session, or another
provider) — also right after the first-run wizard picked that provider. And the same
problem over ACP is a clear error, not "Internal error"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pexpect
from agent_support import INTERPRETER, cli_env
from test_tui import Terminal, terminals  # noqa: F401  (the fixture)

from codemode_testkit.scripted_server import ScriptedModelServer


def keyed_config(home: Path, base_url: str) -> None:
    """A provider that reads its key from $SCRIPTED_TEST_KEY (left unset), and a second
    one that needs none."""
    (home / "config.toml").write_text(
        'model_provider = "keyed"\nmodel = "test-model"\n'
        f'[model_providers.keyed]\nbase_url = "{base_url}"\nenv_key = "SCRIPTED_TEST_KEY"\n'
        f'[model_providers.keyless]\nbase_url = "{base_url}"\ndefault_model = "other-model"\n',
        encoding="utf-8",
    )


def test_a_missing_key_is_entered_for_the_session(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    with ScriptedModelServer([{"text": "keyed reply"}]) as server:
        keyed_config(home, server.base_url)
        term = Terminal([], home=home, cwd=work)
        terminals.append(term)
        term.expect("! keyed needs an API key: SCRIPTED_TEST_KEY is not set")
        term.expect("enter a key for this session")
        term.send_line("1")
        term.expect("SCRIPTED_TEST_KEY ›")
        term.send_line("sk-typed-secret-4711")
        term.expect("test-model via keyed")
        term.prompt()
        term.send_line("hi")
        term.expect("keyed reply")
        term.prompt()
        assert term.finish() == 0
    assert server.requests[0].headers["authorization"] == "Bearer sk-typed-secret-4711"
    assert "sk-typed-secret-4711" not in term.log  # typed hidden
    assert "Traceback" not in term.log
    assert "sk-typed" not in (home / "config.toml").read_text()  # not saved


def test_another_provider_can_be_picked_instead(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    with ScriptedModelServer([{"text": "keyless reply"}]) as server:
        keyed_config(home, server.base_url)
        term = Terminal([], home=home, cwd=work)
        terminals.append(term)
        term.expect("SCRIPTED_TEST_KEY is not set")
        term.send_line("2")
        term.expect("keyless")
        term.expect("provider ›")
        term.send_line("keyless")
        term.expect("model [other-model]")
        term.send_line("")
        term.expect("other-model via keyless")
        term.prompt()
        term.send_line("hi")
        term.expect("keyless reply")
        term.prompt()
        assert term.finish() == 0
    assert server.requests[0].body["model"] == "other-model"
    assert "authorization" not in server.requests[0].headers


def test_after_the_wizard_picks_a_key_provider_the_session_asks_for_the_key(
    home: Path, work: Path, terminals: list[Terminal]  # noqa: F811
) -> None:
    term = Terminal([], home=home, cwd=work)
    terminals.append(term)
    term.expect("provider (number or name)")
    term.send_line("deepseek")
    term.expect("model [")
    term.send_line("")
    term.expect("use code mode? [Y/n]")
    term.send_line("n")
    term.expect("code_mode = false")
    assert "code_mode = false" in (home / "config.toml").read_text()
    term.expect("! deepseek needs an API key: DEEPSEEK_API_KEY is not set")
    term.expect("1, 2, or Enter to quit")
    term.send_line("")
    term.child.expect(pexpect.EOF)
    term.child.close()
    assert term.child.exitstatus == 2
    assert "Traceback" not in term.log + str(term.child.before)
    # The next start shows the same line and the same way out, not a traceback.
    again = Terminal([], home=home, cwd=work)
    terminals.append(again)
    again.expect("! deepseek needs an API key: DEEPSEEK_API_KEY is not set")
    again.expect("enter a key for this session")


def test_piped_session_with_a_missing_key_is_one_line_and_status_2(home: Path, work: Path) -> None:
    (home / "config.toml").write_text(
        'model_provider = "deepseek"\n', encoding="utf-8"
    )
    proc = subprocess.run(
        [str(INTERPRETER)], input="hi\n", capture_output=True, text=True, cwd=work,
        env=cli_env(home), timeout=60,
    )
    assert proc.returncode == 2
    out = (proc.stdout + proc.stderr).strip()
    assert out == "! deepseek needs an API key: DEEPSEEK_API_KEY is not set", out


def test_acp_new_session_without_a_key_says_which_variable(home: Path, work: Path) -> None:
    (home / "config.toml").write_text('model_provider = "deepseek"\n', encoding="utf-8")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new",
         "params": {"cwd": str(work), "mcpServers": []}},
    ]
    proc = subprocess.Popen(
        [str(INTERPRETER), "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=work, env=cli_env(home),
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies = {}
    try:
        for request in requests:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            while True:
                line = json.loads(proc.stdout.readline())
                if line.get("id") == request["id"]:
                    replies[request["id"]] = line
                    break
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    error = replies[2]["error"]
    assert error["code"] == -32000
    assert "DEEPSEEK_API_KEY" in error["message"] and "Internal" not in error["message"]
