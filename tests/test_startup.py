"""What makes `interpreter exec` start fast, checked for keeping behaviour: httpx without
its command line, no CA bundle for a plain-HTTP model service, pathspec on first use."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.providers.transport import Transport, _tls_options
from codemode.testing.scripted_server import ScriptedModelServer


def _python(code: str, tmp_path: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_httpx_imports_without_its_command_line(tmp_path: Path) -> None:
    out = _python(
        "import sys, codemode\n"
        "print('before', 'httpx._main' in sys.modules)\n"
        "import httpx\n"
        "print('cli', sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'pygments'}))\n"
        "print('client', httpx.AsyncClient is not None)\n",
        tmp_path,
    )
    assert "before False\n" in out  # nothing registered before httpx is imported
    assert "cli []\n" in out, out
    assert "client True\n" in out


def test_httpx_command_line_still_works(tmp_path: Path) -> None:
    # httpx.main and the module's other names load the real httpx._main on first use.
    out = _python(
        "import sys, codemode, httpx\n"
        "fn = httpx._main.print_response\n"
        "print('real', type(sys.modules['httpx._main']).__name__, fn.__module__,\n"
        "      httpx._main is sys.modules['httpx._main'], 'rich' in sys.modules)\n"
        "sys.argv = ['httpx', '--help']\n"
        "try:\n"
        "    httpx.main()\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code)\n",
        tmp_path,
    )
    assert "real module httpx._main True True\n" in out, out
    assert "Usage: httpx <URL>" in out, out


def test_httpx_imported_first_is_left_alone(tmp_path: Path) -> None:
    out = _python(
        "import sys, httpx, codemode\n"
        "print(type(sys.modules['httpx._main']).__name__, 'rich' in sys.modules)\n",
        tmp_path,
    )
    assert out == "module True\n"


def test_plain_http_service_gets_a_verifying_context_without_certificates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    context = _tls_options("http://127.0.0.1:8080/v1")["verify"]
    assert isinstance(context, ssl.SSLContext)
    # Fails closed: verification on, and no CA trusted, so no TLS peer is accepted.
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0
    assert _tls_options("HTTP://localhost/v1")  # the scheme in any case
    # TLS services, and any proxy (it may be reached over TLS), keep httpx's defaults.
    assert _tls_options("https://api.example.com/v1") == {}
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    assert _tls_options("http://127.0.0.1:8080/v1") == {}


async def test_plain_http_transport_streams_from_the_scripted_server() -> None:
    with ScriptedModelServer([{"text": "hello"}]) as server:
        transport = Transport(
            provider="scripted", base_url=server.base_url, api_key=None, env_key=None
        )
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
