"""Issue 29's overflow bar, printed as one JSON object: with an 8,192-token llama-server
(SmolLM2-135M, scripts/setup-local-model.sh builds it), a program runs ``seq 1 3000``
in code mode (the default harness) and the turn must go on.

    .venv/bin/python benchmarks/local_overflow.py [--n-ctx 8192] [--count 3000]

Request 1's reply is scripted through a relay (codemode_testkit/relay.py: a 135M model
does not run ``seq`` when asked); every later request goes to the server unchanged.
Prints each request's size (body characters, the prompt tokens llama.cpp counted, the
HTTP status), the notice the agent printed, the exit status and the wall time. The test
suite runs the same shape at 2,048 tokens (tests/test_local_overflow.py): this one
costs ~100 CPU-s of prompt processing on one thread (measured here: 4,451 tokens, a
400 at 18,436, then 6,575 tokens fit, the turn completes with exit 0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codemode_testkit.local_model import MODEL_NAME, LocalModelServer, find_local_model
from codemode_testkit.relay import Relay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--count", type=int, default=3000)
    args = parser.parse_args()
    found = find_local_model("llama-server")
    if isinstance(found, str):
        print(json.dumps({"skipped": found}))
        return
    program = (f"const r = await tools.shell({{command: 'seq 1 {args.count}'}});\n"
               "console.log(r.output);")
    call = {"tool_calls": [{"name": "exec", "arguments": {"code": program}}]}
    interpreter = Path(sys.executable).with_name("interpreter")
    with tempfile.TemporaryDirectory() as tmp, \
            LocalModelServer(found, n_ctx=args.n_ctx, log=Path(tmp) / "server.log") as server, \
            Relay(server.base_url, [call]) as relay:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        start = time.monotonic()
        run = subprocess.run(
            [str(interpreter), "exec", "-c", "model_provider=llamacpp",
             "-c", f"model_providers.llamacpp.base_url={relay.base_url}", "--model", MODEL_NAME,
             "-c", "max_output_tokens=24", "-c", "temperature=0", "-c", "seed=1",
             "--code-mode", "--max-turns", "3", "count the numbers"],
            cwd=work, env={**os.environ, "CODEMODE_HOME": str(home)},
            capture_output=True, text=True, timeout=1800)
        wall = time.monotonic() - start
    notices = [line for line in run.stderr.splitlines() if "context window" in line
               or "does not fit" in line]
    print(json.dumps({
        "n_ctx": args.n_ctx, "program": f"seq 1 {args.count}",
        "requests": [{"body_chars": r.body_chars, "prompt_tokens": r.prompt_tokens,
                      "status": r.status, "scripted": r.scripted} for r in relay.log],
        "notices": notices, "exit": run.returncode,
        "wall_s": round(wall, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
