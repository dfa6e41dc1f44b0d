"""What a session's first model request needs, made before it: an interactive session
imports httpx and makes its client and TLS context while its user types
(``Transport.prepare``). In a fresh interpreter where what is imported is the point."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.providers.transport import Transport

_PROXIES = ("http_proxy", "https_proxy", "all_proxy")


def _fresh(code: str, cwd: Path, **env: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (no proxy in its environment: a proxy keeps
    httpx's defaults for plain HTTP too); it prints one JSON object last."""
    base = {k: v for k, v in os.environ.items() if k.lower() not in _PROXIES}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**base, **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return found


def test_prepare_loads_httpx_and_the_tls_context_on_another_thread(tmp_path: Path) -> None:
    code = """
import json, ssl, sys, threading
from codemode.providers.transport import Transport
found = {"before": "httpx" in sys.modules}
tls = Transport(provider="p", base_url="https://api.example.com/v1", api_key=None, env_key=None)
plain = Transport(provider="p", base_url="http://127.0.0.1:9/v1", api_key=None, env_key=None)
for t in (tls, plain):
    thread = threading.Thread(target=t.prepare)
    thread.start()
    thread.join()
found["after"] = all(m in sys.modules for m in ("httpx", "httpx_sse"))
def facts(context):
    return [context.cert_store_stats()["x509_ca"], context.verify_mode == ssl.CERT_REQUIRED,
            context.check_hostname]
found["tls"], found["plain"] = facts(tls._verify), facts(plain._verify)
print(json.dumps(found))
"""
    found = _fresh(code, tmp_path)
    assert found["before"] is False and found["after"] is True
    ca, required, hostname = found["tls"]  # type: ignore[misc]
    assert ca > 0 and required and hostname  # httpx's own default: its CA bundle, verifying
    assert found["plain"] == [0, True, True]  # plain HTTP: no bundle, still failing closed


async def test_a_prepared_client_loads_no_ca_bundle_when_its_first_request_opens_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    for name in _PROXIES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)

    def tls() -> Transport:
        return Transport(provider="p", base_url="https://api.example.com/v1", api_key=None,
                         env_key=None)  # fmt: skip

    unprepared = tls()
    unprepared._http()
    assert len(loads) == 1  # the client made its context at the first request
    await unprepared.aclose()
    prepared = tls()
    prepared.prepare()
    assert len(loads) == 2  # ahead
    made = prepared._client
    assert made is not None and prepared._http() is made  # the client made ahead
    assert len(loads) == 2  # not again
    await prepared.aclose()


def test_an_interactive_session_loads_the_model_client_while_its_user_types(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code = f"""
import asyncio, json, sys
from pathlib import Path
from codemode.config import load_config
from codemode.tui.app import InteractiveApp, InteractiveOptions
overrides = ["model_provider=scripted", "model_providers.scripted.base_url=http://127.0.0.1:9/v1",
             "model_providers.scripted.wire_api=chat"]

async def main():
    app = InteractiveApp(InteractiveOptions(cwd=Path({str(work)!r}), overrides=overrides,
                                            model="m"), load_config(overrides))
    found = {{"before": "httpx" in sys.modules}}
    session = app.open_session()
    await app._client_loading  # no turn has run: the user is still typing
    found["loaded"] = "httpx" in sys.modules
    found["prepared"] = session.provider.transport._verify is not None
    await app.close_session()
    await app._wait_prepared()
    app.snapshots.close()
    print(json.dumps(found))

asyncio.run(main())
"""
    found = _fresh(code, tmp_path, CODEMODE_HOME=str(tmp_path / "home"))
    assert found == {"before": False, "loaded": True, "prepared": True}
