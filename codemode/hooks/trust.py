"""Which hooks the person trusted or disabled, recorded against each hook's exact
definition (``HookDef.key``: its file, event, matcher, command and timeout).

A user's own hooks (codemode's home, ``config.toml``, their Codex and Claude Code homes)
run unless disabled. A project's hooks come with a repository someone else may have
written: they run only once trusted, and a changed hook is a new key, so it is asked
about again. The store is ``$CODEMODE_HOME/hooks-trust.json``: inside codemode's own
home, which commands the agent runs cannot write (``codemode.sandbox.protection.protected``), so a
program cannot trust its own hooks.

Trust covers content, not only the line: a hook whose command names files lying where a
confined command of this or an earlier session could have written them (``sh
scripts/fmt.sh``, ``./scripts/guard.sh`` in a workspace; ``codemode.locations.launcher``)
is trusted together with the sha256 of each, recorded when the person trusts it, and
with the folder each loads from (``script_folders``: a module beside a Python script
runs as much as the script does). A changed file or folder makes it untrusted again
(``changed`` names it), the launcher checks the digests once more just before each
start, and a user's own hook naming such a file needs trusting too: the user wrote the
line, not what a program left in the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from codemode.hooks import script_folders
from codemode.hooks.definitions import HookDef
from codemode.locations import launcher
from codemode.locations.host_programs import writable_root_of

TRUST_FILE = "hooks-trust.json"

State = Literal["trusted", "untrusted", "disabled"]


class TrustStore:
    """The trust file of one home; read once, written whole on each change."""

    def __init__(self, home: Path, cwd: Path | None = None) -> None:
        self.path = home / TRUST_FILE
        self.cwd = cwd  # where hooks run: the folder their relative names start from
        self._trusted: dict[str, dict[str, Any]] = {}
        self._disabled: dict[str, dict[str, Any]] = {}
        self.problem: str | None = None
        # What each hook's trust covers, by key: hashed once a store (a session's start,
        # a listing and the trust that follows it), not once for each question asked.
        self._coverage: dict[str, tuple[dict[str, str], list[str], list[str]]] = {}
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
        files = self.named(hook)
        if files:
            return "trusted" if not self.changed(hook, files) else "untrusted"
        if hook.scope == "user" or hook.key in self._trusted:
            return "trusted"
        return "untrusted"

    def named(self, hook: HookDef) -> dict[str, str]:
        """The files ``hook``'s command names that a command could have written (any in
        the workspace, which sessions there let commands write), each with its sha256
        now ("" when it cannot be read), and the folder each loads from where it can be
        kept, with its manifest (``script_folders``)."""
        return self._covered(hook)[0]

    def never(self, hook: HookDef) -> list[str]:
        """Why ``hook`` cannot be trusted as its files are now (a hard link), one line
        each."""
        return self._covered(hook)[2]

    def not_covered(self, hook: HookDef) -> list[str]:
        """What ``hook`` runs that its trust does not cover, one line each: the folder of
        a file it names that cannot be kept, a project's tool (``project_runners``)."""
        from codemode.hooks import project_runners, script_scan
        from codemode.hooks.process import argv_for, project_env

        cwd = self.cwd if self.cwd is not None else Path.cwd()
        env = project_env(os.environ, cwd)
        argv = argv_for(hook.command)
        # (what its scripts start, read as they are now: the files the person trusts)
        started = script_scan.scan(launcher.named_files(argv, cwd, env), self.named(hook),
                                   cwd, env).reasons
        runs = [f"{note}, which a command could have written: the hook runs in the "
                "session's sandbox, as commands do"
                for note in [*project_runners.notes(argv, cwd, env), *started]]
        covered = self._covered(hook)
        return covered[2] + covered[1] + runs

    def _covered(self, hook: HookDef) -> tuple[dict[str, str], list[str], list[str]]:
        if hook.key not in self._coverage:
            self._coverage[hook.key] = self._cover(hook)
        return self._coverage[hook.key]

    def _cover(self, hook: HookDef) -> tuple[dict[str, str], list[str], list[str]]:
        from codemode.hooks.process import argv_for, project_env

        out: dict[str, str] = {}
        notes: list[str] = []
        never: list[str] = []
        inside = self.cwd.resolve() if self.cwd is not None else None
        # (its $VARs as the hook will get them: "$CLAUDE_PROJECT_DIR"/x.sh names x.sh)
        env = project_env(os.environ, self.cwd if self.cwd is not None else Path.cwd())
        folders: dict[str, str] = {}
        for name in launcher.named_files(argv_for(hook.command), self.cwd, env):
            real_path = Path(name).resolve()
            root = writable_root_of(name)
            if root is None and not (inside is not None and real_path.is_relative_to(inside)):
                continue
            real = str(real_path)
            try:
                # A file with another name (a hard link) could be rewritten through it,
                # kept read-only or not: never trusted ("" never matches).
                linked = os.stat(real).st_nlink > 1
                out[real] = "" if linked else launcher.digest(real)
            except OSError:
                linked, out[real] = False, ""
            if linked:
                never.append(f"{real} has another name (a hard link), through which a "
                             "command could rewrite it: the hook is not run while it has")
            try:
                folder = script_folders.folder_for(real, inside, root)
                if str(folder) not in folders:
                    folders[str(folder)] = script_folders.manifest(folder)
            except script_folders.NotKept as why:
                if why.refuse:  # (recorded as nothing that can match: never trusted)
                    folders[str(real_path.parent)] = ""
                    never.append(f"{real}: {why}: the hook is not run while it has")
                else:
                    notes.append(f"{real}: {why}, so what it loads from beside it is not "
                                 "covered (a command could put a module there); keep hook "
                                 "scripts in a folder of their own, such as .codemode/hooks/")
        return {**out, **folders}, list(dict.fromkeys(notes)), list(dict.fromkeys(never))

    def changed(self, hook: HookDef, files: dict[str, str] | None = None) -> list[str]:
        """The named files and folders whose content is not what was trusted (all of
        them when the hook was never trusted with its files)."""
        files = self.named(hook) if files is None else files
        recorded = self._trusted.get(hook.key, {}).get("files")
        if not isinstance(recorded, dict):
            return sorted(files)
        # (a folder trusted once and not kept now: a command filled it past the bounds)
        gone = [f for f, d in recorded.items()
                if isinstance(d, str) and script_folders.is_folder(d) and f not in files]
        return sorted([f for f, d in files.items() if not d or recorded.get(f) != d] + gone)

    def has_files(self, hook: HookDef) -> bool:
        """Whether ``hook`` was trusted together with the content of its files."""
        return isinstance(self._trusted.get(hook.key, {}).get("files"), dict)

    def trusted_files(self, hook: HookDef) -> dict[str, str]:
        """The digests the person accepted for ``hook``'s files (the launcher's
        ``trusted``)."""
        recorded = self._trusted.get(hook.key, {}).get("files")
        return dict(recorded) if isinstance(recorded, dict) else {}

    def trust(self, hooks: Iterable[HookDef]) -> None:
        for hook in hooks:
            self._disabled.pop(hook.key, None)
            files = self.named(hook)
            if hook.scope == "project" or files:
                self._trusted[hook.key] = {**_record(hook), "files": files}
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
