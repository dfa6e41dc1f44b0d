"""What makes `interpreter exec` start fast, checked for keeping behaviour: no CA bundle
for a plain-HTTP model service, pathspec on first use."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.providers.transport import Transport, _tls_verify
from codemode_testkit.scripted_server import ScriptedModelServer


def _python(code: str, tmp_path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_plain_http_service_gets_a_verifying_context_without_certificates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    context = _tls_verify("http://127.0.0.1:8080/v1")
    assert isinstance(context, ssl.SSLContext)
    # Fails closed: verification on, and no CA trusted, so no TLS peer is accepted.
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0
    assert isinstance(_tls_verify("HTTP://localhost/v1"), ssl.SSLContext)  # any case
    # TLS services, and any proxy (it may be reached over TLS), keep httpx's defaults.
    assert _tls_verify("https://api.example.com/v1") is True
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert _tls_verify("http://127.0.0.1:8080/v1") is True


@pytest.mark.parametrize("prepared", [False, True])
async def test_an_http_service_streams_through_httpx(prepared: bool) -> None:
    with ScriptedModelServer([{"text": "hello"}]) as server:
        transport = Transport(
            provider="scripted", base_url=server.base_url, api_key=None, env_key=None
        )
        if prepared:  # its client made ahead (tests/test_first_request_ahead.py)
            transport.prepare()
        try:
            body = {"model": "m", "input": "hi", "stream": True}
            events = [e async for e in transport.events("responses", body, model="m")]
        finally:
            await transport.aclose()
    assert any("hello" in e.data for e in events)


def test_ignore_rules_load_pathspec_on_first_use(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "a.log").write_text("x")
    (tmp_path / "b.txt").write_text("x")
    out = _python(
        "import sys\n"
        "from pathlib import Path\n"
        "from codemode.tools.ignore import walk_files\n"
        "print('loaded', 'pathspec' in sys.modules)\n"
        "print(sorted(str(p) for p in walk_files(Path('.'))))\n"
        "print('loaded', 'pathspec' in sys.modules)\n",
        tmp_path,
    )
    lines = out.splitlines()
    assert lines[0] == "loaded False"
    assert "b.txt" in lines[1] and "a.log" not in lines[1], out
    assert lines[2] == "loaded True"


def test_exit_now_does_what_an_exit_must_and_skips_the_teardown(tmp_path: Path) -> None:
    code = (
        "import atexit, sys, threading, time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from codemode.process.fast_exit import exit_now, is_command_process\n"
        "class Noisy:\n"
        "    def __del__(self):\n"
        "        open('teardown', 'w').write('ran')\n"
        "keep = Noisy()\n"  # a module global: only the interpreter's teardown frees it
        "atexit.register(lambda: open('atexit', 'w').write('ran'))\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    open('thread', 'w').write('ran')\n"
        "threading.Thread(target=late).start()\n"
        "pool = ThreadPoolExecutor(1)\n"  # an idle executor thread must not hang the exit
        "pool.submit(lambda: None).result()\n"
        "print('command process:', is_command_process())\n"
        "sys.stdout.write('unflushed tail')\n"
        "exit_now(3)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "command process: False\nunflushed tail"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "ran"  # joined before exiting
    assert not (tmp_path / "teardown").exists()


def test_command_process_is_the_console_script_only(tmp_path: Path) -> None:
    from codemode.process.fast_exit import is_command_process

    assert not is_command_process()  # pytest's own process: never exited early
    # What the `interpreter` script's __main__ does, and `python -m codemode.cli`'s.
    for entry in ("codemode.launch", "codemode.cli"):
        out = _python(
            f"from {entry} import main\n"
            "from codemode.process.fast_exit import is_command_process\n"
            "print(is_command_process())\n",
            tmp_path,
        )
        assert out == "True\n", entry


def test_exec_exits_with_its_session_log_complete(tmp_path: Path) -> None:
    code = "const r = await tools.shell({command: 'echo hi-there'});\nconsole.log(r.output);\n"
    script: list[dict[str, object]] = [
        {"tool_calls": [{"name": "exec", "freeform": True, "arguments": code}]},
        {"text": "all done"},
    ]
    home, ws, tmp = tmp_path / "home", tmp_path / "ws", tmp_path / "tmp"
    for folder in (home, ws, tmp):
        folder.mkdir()
    interpreter = Path(sys.executable).parent / "interpreter"
    if not interpreter.exists():
        pytest.skip(f"no console script at {interpreter} (run scripts/setup.sh)")
    with ScriptedModelServer(script) as server:
        proc = subprocess.run(
            [
                str(interpreter), "exec", "--code-mode", "--full-auto", "-C", str(ws),
                "-m", "m", "-c", "model_provider=scripted",
                "-c", f"model_providers.scripted.base_url={server.base_url}",
                "-c", "model_providers.scripted.wire_api=responses", "say hi",
            ],
            env={**os.environ, "CODEMODE_HOME": str(home), "TMPDIR": str(tmp)},
            cwd=ws, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "all done\n"
    assert "hi-there" in proc.stderr
    (log,) = (home / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records[-1]["event"]["type"] == "turn.completed", records[-1]
    assert list(tmp.iterdir()) == []  # the sandbox's scratch folder went at exit too
