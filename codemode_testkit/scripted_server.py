"""A model server that answers from a script: a real HTTP server on 127.0.0.1 speaking
the three wires (Chat Completions, Responses, Anthropic Messages) with server-sent
events. It is the one stand-in for a model service that the test suite, benchmarks
and terminal tests use; everything on the client side runs for real against it.

Each request consumes the next ``ScriptedReply`` (or asks a callable for one). A reply
says what the model "says" — text, reasoning, tool calls — and, optionally, which fault
to inject on that attempt: an HTTP error, a Retry-After, a stream cut after N events,
slow chunks, a hang before the headers.

One script serves every wire: a ``ScriptedToolCall(freeform=True)`` is a custom tool
call on the Responses wire and, elsewhere, a function call whose JSON wraps the text
in the tool's single string property (read from the request's tool schema).

The parts live in ``codemode_testkit.scripted`` (the script, one module per wire, the
HTTP server, and an in-process httpx transport); this module keeps their names where
tests import them. Run standalone (for driving the CLI in a pseudo-terminal)::

    python -m codemode_testkit.scripted_server SCRIPT.json [--port N] [--record FILE]

prints the base URL as its first line of output and serves until interrupted.
"""

from __future__ import annotations

import sys

from codemode_testkit.scripted.encoding import Event, estimate_usage, split_args, split_text
from codemode_testkit.scripted.http_server import ScriptedModelServer, main
from codemode_testkit.scripted.replies import RecordedRequest, ScriptedReply, ScriptedToolCall
from codemode_testkit.scripted.script import Script, ScriptedModel
from codemode_testkit.scripted.wires import error_body, error_event, render_events

__all__ = [
    "Event",
    "RecordedRequest",
    "Script",
    "ScriptedModel",
    "ScriptedModelServer",
    "ScriptedReply",
    "ScriptedToolCall",
    "error_body",
    "error_event",
    "estimate_usage",
    "main",
    "render_events",
    "split_args",
    "split_text",
]

if __name__ == "__main__":
    sys.exit(main())
