"""`interpreter policy confinement` and `interpreter doctor` tell the same story."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from codemode.sandbox.confinement.promises import promises

INTERPRETER = Path(sys.executable).parent / "interpreter"


def test_policy_confinement_and_doctor_agree(tmp_path: Path) -> None:
    env = {"CODEMODE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    policy = subprocess.run([str(INTERPRETER), "policy", "confinement", "--json"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert policy.returncode == 0, policy.stderr
    table = json.loads(policy.stdout)["promises"]
    assert set(table) == {p.key for p in promises()}
    doctor = subprocess.run([str(INTERPRETER), "doctor", "--json", "-C", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=60)
    checks = json.loads(doctor.stdout)
    rows = checks["checks"] if isinstance(checks, dict) else checks
    seen = 0
    for row in rows:
        if row.get("section") != "confinement":
            continue
        backend, key = row["label"].split(": ")
        why = table[key][backend]
        assert (row["status"] == "ok") == (why is None), row
        if why is not None:
            assert why in row["detail"], row
        seen += 1
    works = json.loads(policy.stdout)["backends"]
    assert seen == len(table) * sum(1 for b in ("bubblewrap", "landlock") if works[b] is None)
    # the one backend decision, with what it passed over on the way
    chosen = json.loads(policy.stdout)["default_backend"]
    first = next((b for b in ("bubblewrap", "landlock") if works[b] is None), None)
    if chosen["backend"] is None:  # none (or Landlock that cannot block the network)
        assert first != "bubblewrap" and "cannot be enforced" in chosen["error"], chosen
        assert works["bubblewrap"] in chosen["error"], chosen
    else:
        assert chosen["backend"] == first, chosen
        passed = [works["bubblewrap"]] if first == "landlock" else []
        assert chosen["passed_over"] == passed, chosen


def test_every_promise_names_a_reason_when_not_kept() -> None:
    for p in promises():
        for why in (p.bubblewrap, p.landlock):
            assert why is None or len(why) > 10, p
