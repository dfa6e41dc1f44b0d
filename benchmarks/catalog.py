"""What the provider catalog costs, printed as one JSON object.

    .venv/bin/python benchmarks/catalog.py [--runs N]

Each figure is the median of N fresh interpreter processes (a cached read would hide
the cost a user pays once per start):

- providers_ms: reading catalog.json and validating every provider (what a session
  start and ``interpreter providers`` pay);
- models_ms: reading models.json and one model look-up (paid only when model facts are
  needed: a session start, ``interpreter models``);
- providers_cmd_ms: the whole ``interpreter providers`` command, wall clock.

Target: providers_ms and models_ms each under 10 ms, so the catalog never shows in a
start-up time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBE = """
import json, time
t0 = time.perf_counter()
from codemode.providers import catalog
t1 = time.perf_counter()
catalog.builtin_providers()
t2 = time.perf_counter()
catalog.model_facts("anthropic", "claude-sonnet-4-5")
t3 = time.perf_counter()
print(json.dumps({"providers_ms": (t2 - t1) * 1e3, "models_ms": (t3 - t2) * 1e3}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {"providers_ms": [], "models_ms": [],
                                       "providers_cmd_ms": []}
    exe = Path(sys.executable).parent / "interpreter"
    for _ in range(args.runs):
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             check=True)
        for key, value in json.loads(out.stdout).items():
            samples[key].append(value)
        started = time.perf_counter()
        subprocess.run([str(exe), "providers"], capture_output=True, check=True)
        samples["providers_cmd_ms"].append((time.perf_counter() - started) * 1e3)
    from codemode.providers.catalog import builtin_providers, provider_models

    names = builtin_providers()
    result = {key: round(statistics.median(values), 2) for key, values in samples.items()}
    result["providers"] = len(names)
    result["models"] = sum(len(provider_models(name)) for name in names)
    result["runs"] = args.runs
    print(json.dumps(result))


if __name__ == "__main__":
    main()
