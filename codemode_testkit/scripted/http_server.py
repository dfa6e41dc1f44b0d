"""The scripted model behind a real HTTP server on 127.0.0.1 (a ThreadingHTTPServer),
streaming server-sent events with chunked transfer encoding; the one stand-in for a
model service that integration tests, benchmarks and terminal tests use."""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from codemode_testkit.scripted.script import (
    JsonAnswer,
    Script,
    ScriptedModel,
    StreamAnswer,
    sse_frame,
)


class ScriptedModelServer(ScriptedModel):
    """The scripted server; ``with ScriptedModelServer([...]) as server:`` starts it on
    an ephemeral port and ``server.base_url`` is the ``/v1`` root to configure."""

    def __init__(
        self,
        script: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | Path | None = None,
    ) -> None:
        super().__init__(script, record_path=record_path)
        self._host = host
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("scripted server: not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> Self:
        handler = type("_Handler", (_Handler,), {"scripted": self})
        self._server = _QuietServer((self._host, self._port), handler)
        self._thread = threading.Thread(
            # A short poll keeps stop() quick (shutdown waits for the next poll).
            target=self._server.serve_forever, args=(0.02,), name="scripted-model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, closed keep-alive connections) are routine here.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._deliver(self.scripted.answer("GET", self.path, {}, b""))

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.scripted.answer("POST", self.path, headers, raw)
        try:
            self._deliver(answer)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)

    def _deliver(self, answer: JsonAnswer | StreamAnswer) -> None:
        if answer.hang_s:
            time.sleep(answer.hang_s)
        if isinstance(answer, JsonAnswer):
            self._json(answer.status, answer.body, answer.headers)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n, event in enumerate(answer.events):
            if answer.cut is not None and n >= answer.cut:
                # Drop the connection with the chunked body unfinished, as a proxy or a
                # crashed server would.
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if answer.end is not None and n >= answer.end:
                break
            if n and answer.chunk_delay_s:
                time.sleep(answer.chunk_delay_s)
            self._chunk(sse_frame(event))
        self._chunk(b"")
        if answer.close:
            self.close_connection = True

    def _chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script file until interrupted, printing the base URL first."""
    parser = argparse.ArgumentParser(
        prog="python -m codemode_testkit.scripted_server",
        description="Serve a scripted model on 127.0.0.1 (chat, responses and anthropic wires).",
    )
    parser.add_argument("script", help="JSON file: a list of replies")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--record", help="append each request as a JSON line to this file")
    args = parser.parse_args(argv)
    try:
        server = ScriptedModelServer.from_file(args.script, host=args.host, port=args.port,
                                               record_path=args.record)
    except (OSError, ValueError) as exc:
        print(f"scripted server: {exc}", file=sys.stderr)
        return 2
    server.start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
