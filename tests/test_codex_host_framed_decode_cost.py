"""What one frame of the framed protocol can cost the host to read (docs/threat-model.md,
family 6: decoding cost counts elements, not only bytes). A frame may be 64 MiB, and
JSON's decoder makes an object of every element: 33 MiB of empty objects once cost the
host seconds of CPU and a gigabyte. A frame past ``MAX_ELEMENTS`` is refused before it is
decoded, answered where its id can be read; a large frame of strings is still read."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from codemode.process.json_cost import MAX_ELEMENTS
from tests.codex_host_support import INTERPRETER
from tests.stdio_peers import cpu_s as _cpu_s
from tests.stdio_peers import peak_mb as _rss_mb
from tests.test_codex_host_framed import HELLO, Peer, tool_def


@contextmanager
def cold_host() -> Iterator[Peer]:
    """The host in a process of its own (not a warm server's child): its pid is the
    process whose CPU and memory are read."""
    proc = subprocess.Popen(
        [INTERPRETER, "code-mode-host"], env=dict(os.environ, CODEMODE_WARM="0"),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield Peer(proc)
    finally:
        proc.kill()
        proc.wait(10)


def test_a_frame_of_tiny_elements_is_refused_before_it_is_decoded() -> None:
    with cold_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.until(lambda m: m.get("id") == 1)
        pid = peer.proc.pid
        cpu, peak = _cpu_s(pid), _rss_mb(pid)
        flood = b"[" + b"{}," * (11 << 20) + b"{}]"  # 33 MiB, 11 Mi objects
        head = b'{"type":"operation/request","id":7,"request":'
        peer.send_raw(head + b'{"method":"session/open","sessionId":"t","x":' + flood + b"}}")
        refused = peer.until(lambda m: m.get("id") == 7)
        assert refused["result"]["status"] == "error", refused
        assert f"more than {MAX_ELEMENTS} JSON elements" in refused["result"]["message"]
        spent, grown = _cpu_s(pid) - cpu, _rss_mb(pid) - peak
        # Decoding it takes ~1.5 s of CPU and ~900 MB; refusing it, a fraction of a second.
        assert spent < 1.2, f"the host spent {spent:.2f} s of CPU on one frame"
        assert grown < 250, f"the host's peak memory grew {grown:.0f} MiB"
        # The connection serves on.
        peer.request(8, {"method": "session/open", "sessionId": "u"})
        assert peer.until(lambda m: m.get("id") == 8)["result"]["status"] == "ok"


def test_a_large_result_of_strings_is_read_and_a_flood_of_elements_fails_its_call() -> None:
    with cold_host() as peer:
        peer.send(HELLO)
        peer.read()
        peer.request(1, {"method": "session/open", "sessionId": "s"})
        peer.until(lambda m: m.get("id") == 1)
        source = (
            "const big = await tools.big({});\ntext(`big: ${big.length}`);\n"
            "try { await tools.many({}); } catch (e) { text(`failed: ${e}`); }\n"
            "text(`small: ${(await tools.small({})).length}`);\n"
        )
        tools = [tool_def("big"), tool_def("many"), tool_def("small")]
        body = {"tool_call_id": "c", "enabled_tools": tools, "source": source,
                "yield_time_ms": 120_000}  # fmt: skip
        peer.request(2, {"method": "session/execute", "sessionId": "s", "request": body})
        # A command's output full of commas, brackets and escapes: one string, read whole.
        text = 'a,b,[c],{"d": 1}\n' * 400_000  # 7 MiB, 2.4 M commas and brackets
        results = {
            "big": json.dumps(text).encode(),
            "many": json.dumps(list(range(MAX_ELEMENTS + 10))).encode(),
            "small": json.dumps([1, 2, 3]).encode(),
        }
        for _ in range(3):
            call = peer.until(lambda m: m["type"] == "delegate/request")
            name = call["request"]["invocation"]["tool_name"]["name"]
            peer.send_raw(
                b'{"type":"delegate/response","id":%d,"result":{"status":"ok","value":{"result":%s}}}'
                % (call["id"], results[name])
            )
        done = peer.until(lambda m: m["type"] == "execute/initialResponse")
        got = [i["text"] for i in done["result"]["value"]["Result"]["content_items"]]
        assert got[0] == f"big: {len(text)}", got[0][:200]
        assert got[1].startswith("failed: ") and "JSON elements" in got[1], got[1]
        assert got[2] == "small: 3", got
