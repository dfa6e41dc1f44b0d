"""Which hooks the person trusted or disabled, recorded against each hook's exact
definition (``HookDef.key``: its file, event, matcher, command and timeout).

A user's own hooks (codemode's home, ``config.toml``, their Codex and Claude Code homes)
run unless disabled. A project's hooks come with a repository someone else may have
written: they run only once trusted, and a changed hook is a new key, so it is asked
about again. The store is ``$CODEMODE_HOME/hooks-trust.json``: inside codemode's own
home, which commands the agent runs cannot write (``codemode.sandbox.protection.protected``), so a
program cannot trust its own hooks.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from codemode.hooks.definitions import HookDef

TRUST_FILE = "hooks-trust.json"

State = Literal["trusted", "untrusted", "disabled"]


class TrustStore:
    """The trust file of one home; read once, written whole on each change."""

    def __init__(self, home: Path) -> None:
        self.path = home / TRUST_FILE
        self._trusted: dict[str, dict[str, str]] = {}
        self._disabled: dict[str, dict[str, str]] = {}
        self.problem: str | None = None
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            # Unreadable: nothing is trusted (project hooks stay off), said once.
            self.problem = f"{self.path}: cannot read the hooks trust file ({exc})"
            return
        if isinstance(data, dict):
            for name, target in (("trusted", self._trusted), ("disabled", self._disabled)):
                table = data.get(name)
                if isinstance(table, dict):
                    target.update({k: v for k, v in table.items() if isinstance(v, dict)})

    def state(self, hook: HookDef) -> State:
        if hook.key in self._disabled:
            return "disabled"
        if hook.scope == "user" or hook.key in self._trusted:
            return "trusted"
        return "untrusted"

    def trust(self, hooks: Iterable[HookDef]) -> None:
        for hook in hooks:
            self._disabled.pop(hook.key, None)
            if hook.scope == "project":
                self._trusted[hook.key] = _record(hook)
        self._save()

    def disable(self, hooks: Iterable[HookDef]) -> None:
        for hook in hooks:
            self._trusted.pop(hook.key, None)
            self._disabled[hook.key] = _record(hook)
        self._save()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(
            {"version": 1, "trusted": self._trusted, "disabled": self._disabled},
            indent=1,
            ensure_ascii=False,
        )
        # Written whole and renamed into place: a crash leaves the old file or the new.
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".hooks-trust.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _record(hook: HookDef) -> dict[str, str]:
    # What the person saw when they decided, kept for `interpreter hooks list`.
    return {"event": hook.event, "command": hook.command, "source": hook.source}
