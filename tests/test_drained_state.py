"""The drained state as the parent reads it: the usual state (new calls only), taken
apart without parsing it whole, reads exactly as the whole parse would, and anything
that differs from the prelude's fixed text by a character is parsed (or refused) whole."""

from __future__ import annotations

import json

import pytest

from codemode.js_runtime.state import Tampered, parse_state

TAIL = ',"timers":[],"logs":[],"done":null,"overLimit":false,"pending":{},"live":{}}}'


def state(calls: str, pending: str = "1", live: str = "0") -> str:
    return '{"calls":' + calls + TAIL.format(pending, live)


USUAL = [
    state('[[5,"noop","{}"]]'),
    state("[]", "0"),
    state('[[5,"shell","{\\"command\\":\\"ls\\"}"],[6,"x","{}"]]', "12", "340"),
    state('[[7,"n\\ud800","{}"]]'),  # a lone surrogate: made well-formed
    state('[[5,"noop","{}"]] '),  # whitespace the prelude never writes
]


@pytest.mark.parametrize("text", USUAL)
def test_the_usual_state_reads_as_the_whole_parse_does(text: str) -> None:
    whole = json.loads(text)
    parsed = parse_state(text)
    for key in ("calls", "timers", "logs", "done", "overLimit"):
        expected = whole[key]
        if key == "calls" and "\\ud800" in text:
            expected = [[7, "n\ufffd", "{}"]]
        assert parsed[key] == expected, key


REFUSED = {
    "a count with a leading zero": state("[]", "01"),
    "a count in other digits": state("[]", "\u0661"),
    "text after the object": state("[]") + "{",
    "calls that are not a list": state("5"),
    "a call id that is not a number": state('[[true,"noop","{}"]]'),
    "an unclosed list of calls": '{"calls":[[5,"noop","{}"]' + TAIL.format("1", "0"),
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_a_state_that_differs_is_refused_as_the_whole_parse_refuses_it(kind: str) -> None:
    with pytest.raises(Tampered):
        parse_state(REFUSED[kind])


def test_a_count_the_whole_parse_takes_is_taken() -> None:
    # "pending" as a fraction: not the prelude's text, but JSON: parsed whole.
    parsed = parse_state(state('[[5,"noop","{}"]]', "1.5"))
    assert parsed["calls"] == [[5, "noop", "{}"]] and parsed["done"] is None
