"""Local model server figures, printed as one JSON object.

    .venv/bin/python benchmarks/local_model.py [--runs 3] [--prompt-tokens 400] [--gen 64]

Starts each cached server (scripts/setup-local-model.sh builds them) with SmolLM2-135M
on one thread and on two, and reports, as medians over the runs:

- ``build_s``: how long the cold build took (written by the setup script);
- ``load_s``: process start until the server answers ``/v1/models``;
- ``prompt_tok_s`` / ``gen_tok_s``: prompt processing and generation speed, from
  llama-server's own ``timings`` (llama-cpp-python's server reports none: its figures
  are tokens over wall time of a non-streamed request, prompt and generation together).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import httpx

from codemode_testkit.local_model import (
    LLAMA_CPP_PYTHON_VERSION,
    MODEL_NAME,
    NODE_LLAMA_CPP_VERSION,
    LocalModelServer,
    cache_dir,
    find_local_model,
)


def build_seconds(kind: str) -> float | None:
    folder = f"llama-server-nlc-{NODE_LLAMA_CPP_VERSION}" if kind == "llama-server" \
        else f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}-nlc-{NODE_LLAMA_CPP_VERSION}"
    marker = cache_dir() / folder / ".build-seconds"
    try:
        return float(marker.read_text())
    except (OSError, ValueError):
        return None


def measure(kind: str, runs: int, prompt_tokens: int, gen: int,
            threads: int) -> dict[str, object]:
    found = find_local_model(kind)  # type: ignore[arg-type]
    if isinstance(found, str):
        return {"skipped": found}
    loads, prompt_speed, gen_speed, wall_speed = [], [], [], []
    # Different text each run, so no run reads the previous one's prompt from the cache.
    for run in range(runs):
        with LocalModelServer(found, n_ctx=2048, threads=threads) as server:
            loads.append(server.load_s)
            words = " ".join(f"w{run}x{i}" for i in range(prompt_tokens // 3))
            body = {"model": MODEL_NAME, "max_tokens": gen, "temperature": 0.8,
                    "messages": [{"role": "user", "content": f"{words}\nWrite a story."}]}
            start = time.monotonic()
            reply = httpx.post(f"{server.base_url}/chat/completions", json=body,
                               timeout=600).json()
            took = time.monotonic() - start
            timings = reply.get("timings")
            usage = reply.get("usage") or {}
            if timings:
                prompt_speed.append(timings["prompt_per_second"])
                gen_speed.append(timings["predicted_per_second"])
            elif took > 0:
                wall_speed.append((usage.get("prompt_tokens", 0)
                                   + usage.get("completion_tokens", 0)) / took)
    out: dict[str, object] = {"build_s": build_seconds(kind),
                              "load_s": round(statistics.median(loads), 2)}
    if prompt_speed:
        out["prompt_tok_s"] = round(statistics.median(prompt_speed), 1)
        out["gen_tok_s"] = round(statistics.median(gen_speed), 1)
    if wall_speed:
        out["tok_s_wall"] = round(statistics.median(wall_speed), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--gen", type=int, default=64)
    args = parser.parse_args()
    figures = {f"{kind} threads={threads}": measure(kind, args.runs, args.prompt_tokens,
                                                    args.gen, threads)
               for kind in ("llama-server", "llama-cpp-python") for threads in (1, 2)}
    print(json.dumps({"model": "SmolLM2-135M-Instruct Q4_1", **figures}, indent=2))


if __name__ == "__main__":
    main()
