"""What crosses the pipe from the program's side, checked, and what goes back.

The drained state comes from JavaScript that the program may have tampered with (and,
after an engine escape, from a worker that is not the prelude at all): it is parsed
without trusting it, and anything that is not the prelude's shape is ``Tampered``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any


class Tampered(Exception):
    """What the worker sent back is not what the prelude sends: the program changed
    the runtime's internals (or the engine misbehaved)."""


def well_formed(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [well_formed(v) for v in value]
    if isinstance(value, dict):
        return {well_formed(k): well_formed(v) for k, v in value.items()}
    return value


# The C scanner ``json.loads`` ends in, without the two whitespace matches and the
# checks around it: half of what parsing a tool call's state costs.
_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> object:
    """``json.loads(text)``; what the scanner cannot take whole (leading or trailing
    whitespace, or not JSON) goes to ``json.loads`` itself, which raises as it would."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


# The state of a drain with new calls and nothing else, as the prelude writes it by
# hand: everything after the calls is fixed but the two counts, which the host does
# not read. Taken apart here without parsing it all (a tool call's usual state).
_CALLS_HEAD = '{"calls":'
_CALLS_TAIL = re.compile(
    r',"timers":\[\],"logs":\[\],"done":null,"overLimit":false,'
    r'"pending":(?:0|[1-9][0-9]*),"live":(?:0|[1-9][0-9]*)\}'
)


def _calls_only(text: str) -> dict[str, Any] | None:
    """The state of a drain with new calls only, as ``json.loads`` would read it (the
    counts left out); None when ``text`` is not that (then it is parsed whole)."""
    if not text.startswith(_CALLS_HEAD) or "\\u" in text:
        return None
    try:
        calls, end = _SCAN(text, len(_CALLS_HEAD))
    except (StopIteration, ValueError, RecursionError):
        return None
    if _CALLS_TAIL.fullmatch(text, end) is None:
        return None
    return {"calls": calls, "timers": [], "logs": [], "done": None, "overLimit": False}


def parse_state(text: str) -> dict[str, Any]:
    """The drained state, checked: the program may have replaced what produces it."""
    quick = _calls_only(text)
    if quick is not None:
        _check_calls(quick["calls"])
        return quick
    try:
        state = _loads(text)
        # Lone surrogates ("\uD800"), which no UTF-8 output can carry, become U+FFFD.
        if "\\ud" in text or "\\uD" in text:
            state = well_formed(state)
    except RecursionError:
        raise Tampered("the program's result is nested too deeply to send") from None
    except ValueError:
        raise Tampered("the runtime's internal state was not JSON") from None
    if not isinstance(state, dict):
        raise Tampered("the runtime's internal state is not an object")
    logs, calls, done = state.get("logs"), state.get("calls"), state.get("done")
    if not isinstance(logs, list) or not isinstance(calls, list):
        raise Tampered("the runtime's internal state lacks its lists")
    for entry in logs:
        if not (
            isinstance(entry, list) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
        ):
            raise Tampered("a console entry is malformed")
    _check_calls(calls)
    timers = state.setdefault("timers", [])
    if not isinstance(timers, list):
        raise Tampered("the runtime's internal state lacks its lists")
    for timer in timers:
        if not (
            isinstance(timer, list)
            and len(timer) == 2
            and type(timer[0]) is int
            and isinstance(timer[1], int | float)
            and not isinstance(timer[1], bool)
        ):
            raise Tampered("a timer is malformed")
    if done is not None:
        if not isinstance(done, dict) or not isinstance(done.get("ok"), bool):
            raise Tampered("the program's outcome is malformed")
        if not done["ok"]:
            err = done.get("error")
            if not isinstance(err, dict) or not all(
                isinstance(err.get(k), str) for k in ("name", "message", "stack")
            ):
                raise Tampered("the program's error is malformed")
    if not isinstance(state.get("overLimit", False), bool):
        raise Tampered("the runtime's internal state is malformed")
    return state


def _check_calls(calls: list[Any]) -> None:
    if not isinstance(calls, list):
        raise Tampered("the runtime's internal state lacks its lists")
    for call in calls:
        if not (
            isinstance(call, list)
            and len(call) == 3
            and type(call[0]) is int
            and isinstance(call[1], str)
            and isinstance(call[2], str)
        ):
            raise Tampered("a tool call is malformed")


def _encoder() -> Callable[[object], str]:
    """``json.dumps(value, default=str, allow_nan=False, separators=(",", ":"))``, built
    once: ``JSONEncoder.encode`` builds its C encoder anew on every call (every tool
    call), a third of its cost. No circular-reference check: a cycle is a
    RecursionError, which ``encode_results`` handles like any other failure."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(default=str, allow_nan=False, separators=(",", ":")).encode
    chunks = make(None, str, json.encoder.encode_basestring_ascii, None, ":", ",",
                  False, False, False)  # fmt: skip
    return lambda value: "".join(chunks(value, 0))


_ENCODE = _encoder()


def encode_results(results: list[list[object]]) -> str:
    try:
        return _ENCODE(results)
    except (ValueError, TypeError, RecursionError):
        pass
    parts = []
    for call_id, ok, payload in results:
        try:
            parts.append(json.dumps([call_id, ok, payload], default=str, allow_nan=False))
        except (ValueError, TypeError, RecursionError):
            message = "the tool's result cannot be passed to JavaScript (not JSON)"
            parts.append(json.dumps([call_id, False, message]))
    return "[" + ",".join(parts) + "]"

