"""A relay on 127.0.0.1 in front of a real model server: its first replies come from a
script (a model this small will not call ``seq 1 3000`` when asked), every later
request goes to the real server as sent and its answer, errors included, comes back
as the server wrote it. Each request's size and the server's answer are recorded."""

from __future__ import annotations

import http.client
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from codemode_testkit.scripted.script import ScriptedModel, StreamAnswer, sse_frame


@dataclass
class Relayed:
    body_chars: int
    status: int
    prompt_tokens: int | None  # what the server counted (usage, or the overflow error's)
    scripted: bool


@dataclass
class Relay:
    upstream: str  # the real server's /v1 root
    script: list[dict[str, Any]]
    log: list[Relayed] = field(default_factory=list)
    scripted: int = 0  # script replies used
    _server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Relay:
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if relay.scripted < len(relay.script):
                    # Measured by the real server (one token generated), answered from
                    # the script with the real prompt size as its usage.
                    reply = dict(relay.script[relay.scripted])
                    relay.scripted += 1
                    probe = {**json.loads(raw), "max_tokens": 1}
                    status, _, data = relay._forward(self.path, json.dumps(probe).encode())
                    tokens = _prompt_tokens(data) if status == 200 else None
                    if tokens:
                        reply["usage"] = {"input_tokens": tokens, "output_tokens": 20}
                    answer = ScriptedModel([reply]).answer("POST", self.path, {}, raw)
                    assert isinstance(answer, StreamAnswer)
                    data = b"".join(sse_frame(e) for e in answer.events)
                    relay.log.append(Relayed(len(raw), 200, tokens, True))
                    self._send(200, "text/event-stream", data)
                    return
                status, kind, data = relay._forward(self.path, raw)
                relay.log.append(Relayed(len(raw), status, _prompt_tokens(data), False))
                self._send(status, kind, data)

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def _forward(self, path: str, raw: bytes) -> tuple[int, str, bytes]:
        up = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=600)
        try:
            conn.request("POST", up.path.rstrip("/") + path[len("/v1"):], raw,
                         {"Content-Type": "application/json"})
            reply = conn.getresponse()
            return reply.status, reply.getheader("content-type") or "", reply.read()
        finally:
            conn.close()

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


def _prompt_tokens(data: bytes) -> int | None:
    text = data.decode("utf-8", "replace")
    found = re.findall(r'"(?:prompt_tokens|n_prompt_tokens)"\s*:\s*(\d+)', text)
    if found:
        return int(found[-1])
    try:
        return int(json.loads(text)["error"]["n_prompt_tokens"])
    except (ValueError, KeyError, TypeError):
        return None
