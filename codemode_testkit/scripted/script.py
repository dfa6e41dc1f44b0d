"""The script a scripted model answers from, and what it answers: which reply a request
gets, the faults of that attempt, and the wire-neutral answer (a JSON error, or a
stream of events) that a transport then delivers — over real HTTP
(``http_server``) or in-process (``in_process``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from codemode_testkit.scripted.encoding import Event
from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply
from codemode_testkit.scripted.wires import error_body, error_event, render_events

Script = Sequence[ScriptedReply | Mapping[str, object]] | Callable[[RecordedRequest], object]

_ROUTES = (("chat/completions", "chat"), ("responses", "responses"), ("messages", "anthropic"))


@dataclass
class JsonAnswer:
    """A complete JSON reply (an error, or a refusal of the request)."""

    status: int
    body: dict[str, object]
    headers: dict[str, str] = field(default_factory=dict)
    hang_s: float = 0.0  # wait this long before the headers


@dataclass
class StreamAnswer:
    """A 200 event stream; after ``cut`` events the connection drops (the body left
    unfinished), after ``end`` it ends cleanly."""

    events: list[Event]
    cut: int | None = None
    end: int | None = None
    chunk_delay_s: float = 0.0
    hang_s: float = 0.0
    close: bool = False  # close the connection after the body (an error in the stream)


Answer = JsonAnswer | StreamAnswer


def _not_retried(message: str, kind: str | None = None) -> JsonAnswer:
    error: dict[str, str] = {"message": message}
    if kind is not None:
        error["type"] = kind
    return JsonAnswer(500, {"error": error}, {"x-should-retry": "false"})


class ScriptedModel:
    """The scripted model without a server: the replies, the requests received, and
    the answer to each request. Thread-safe (a server answers on several threads)."""

    def __init__(self, script: Script, *, record_path: str | Path | None = None) -> None:
        if callable(script):
            self._replies: list[ScriptedReply] | None = None
            self._responder: Callable[[RecordedRequest], object] | None = script
        else:
            self._replies = [_as_reply(r) for r in script]
            self._responder = None
        self.requests: list[RecordedRequest] = []
        self.replies_used = 0
        self._record_path = Path(record_path) if record_path else None
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._ids = 0

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> Self:
        """Answering from a JSON file: a list of replies (or ``{"replies": [...]}``)."""
        data = json.loads(Path(path).read_text("utf-8"))
        if isinstance(data, dict):
            data = data.get("replies")
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of replies")
        return cls(data, **kwargs)

    @property
    def remaining(self) -> int | None:
        """Replies not yet consumed (None for a callable script)."""
        return None if self._replies is None else len(self._replies) - self.replies_used

    def push(self, *replies: ScriptedReply | Mapping[str, object]) -> None:
        """Append replies to a running list script (an interactive test's next answers)."""
        if self._replies is None:
            raise TypeError("scripted server: push() needs a list script, not a callable")
        with self._lock:
            self._replies.extend(_as_reply(r) for r in replies)
            self._arrived.notify_all()

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived; raises TimeoutError naming how many did."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= count, timeout_s):
                raise TimeoutError(
                    f"scripted server: {len(self.requests)} of {count} requests arrived "
                    f"within {timeout_s}s"
                )
            return list(self.requests)

    # --- answering ---------------------------------------------------------------------

    def answer(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Answer:
        """The answer to one request (``target``: its path and query string); the
        request is recorded and consumes a reply when it is a streaming POST to a wire."""
        if method != "POST":
            return JsonAnswer(404, {"error": {"message": f"scripted server: no route "
                                                         f"{method} {target}"}})
        path, _, query = target.partition("?")
        path = path.rstrip("/")
        wire = next((w for suffix, w in _ROUTES if path.endswith("/" + suffix)), None)
        if wire is None:
            return JsonAnswer(404, {"error": {"message": f"scripted server: no route POST {path}"}})
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return JsonAnswer(400, {"error": {"message": "scripted server: the body is not JSON"}})
        request = RecordedRequest(wire=wire, path=path, headers=headers, body=body, query=query)
        self._record(request)
        if body.get("stream") is not True:
            return JsonAnswer(400, {"error": {"message": "scripted server: only streaming "
                                                         "requests are supported (stream: true)"}})
        try:
            reply = self._next_reply(request)
        except Exception as exc:  # a broken responder must read clearly in the test
            return _not_retried(f"scripted server: the script raised {type(exc).__name__}: {exc}")
        if reply is None:
            return _not_retried(f"scripted server: script exhausted after {self.replies_used} "
                                "replies", "server_error")
        return self._reply_answer(wire, request, reply)

    def _reply_answer(self, wire: str, request: RecordedRequest, reply: ScriptedReply) -> Answer:
        if reply.status != 200 and not reply.error_in_stream:
            extra = {}
            if reply.retry_after is not None:
                extra["Retry-After"] = _seconds(reply.retry_after)
            return JsonAnswer(reply.status, error_body(wire, reply, request), extra, reply.hang_s)
        events = list(render_events(wire, request, reply, self._new_id()))
        if reply.error_in_stream:
            events = events[: reply.cut_after_events or 0]
            events.append(error_event(wire, reply, request))
        return StreamAnswer(
            events,
            cut=None if reply.error_in_stream else reply.cut_after_events,
            end=reply.end_after_events,
            chunk_delay_s=reply.chunk_delay_s,
            hang_s=reply.hang_s,
            close=reply.error_in_stream,
        )

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self._arrived.notify_all()
            if self._record_path is not None:
                with self._record_path.open("a", encoding="utf-8") as out:
                    out.write(request.model_dump_json() + "\n")

    def _next_reply(self, request: RecordedRequest) -> ScriptedReply | None:
        with self._lock:
            self.replies_used += 1
            if self._replies is None:
                responder = self._responder
            elif self.replies_used <= len(self._replies):
                return self._replies[self.replies_used - 1]
            else:
                self.replies_used -= 1
                return None
        assert responder is not None
        return _as_reply(responder(request))

    def _new_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids


def _as_reply(value: object) -> ScriptedReply:
    if isinstance(value, ScriptedReply):
        return value
    return ScriptedReply.model_validate(value)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def sse_frame(event: Event) -> bytes:
    """One event as it goes on the wire."""
    name, data = event
    return ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode()
