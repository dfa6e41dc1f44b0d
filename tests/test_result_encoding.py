"""Tool results on their way into the isolate (``state.encode_results``)."""

from __future__ import annotations

import json

from codemode.js_runtime.state import encode_results

_NOT_JSON = "the tool's result cannot be passed to JavaScript (not JSON)"


def test_results_are_compact_json_that_reads_back_the_same() -> None:
    results: list[list[object]] = [
        [1, True, {"a": [1, 2.5, None, "é ✓ 😀"], "b": {}}],
        [2, False, "tools.x failed"],
    ]
    text = encode_results(results)
    assert json.loads(text) == results
    assert ", " not in text and ": " not in text
    # A lone surrogate (a JavaScript string may hold one) crosses as an escape.
    assert json.loads(encode_results([[3, True, "\ud800"]])) == [[3, True, "\ud800"]]


def test_a_result_without_a_json_form_fails_that_call_only() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    cyclic: list[object] = []
    cyclic.append(cyclic)
    text = encode_results(
        [[1, True, float("nan")], [2, True, {}], [3, True, cyclic], [4, True, Opaque()]]
    )
    assert json.loads(text) == [
        [1, False, _NOT_JSON],
        [2, True, {}],
        [3, False, _NOT_JSON],
        [4, True, "opaque"],  # anything else becomes its text, as before
    ]
    # and the encoder still works after those failures
    assert encode_results([[5, True, [1]]]) == "[[5,true,[1]]]"
