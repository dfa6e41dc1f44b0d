"""``/hooks``: every hook this session found, with its source and state; trust or
disable them (docs/hooks.md). A change applies from the session's next call on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from codemode.tui.commands import command

if TYPE_CHECKING:
    from codemode.tui.protocols import App

USAGE = "/hooks [trust|disable N...|all]"


@command("/hooks", USAGE, "list the hooks with their source and state; trust or disable them")
async def _hooks(app: App, arg: str) -> None:
    from codemode.assembly.hooks import refresh_hooks
    from codemode.config import codemode_home
    from codemode.hooks.review import review

    found = review(app.cwd, codemode_home(), app.config.hooks, app.config.hooks_from_other_agents)
    verb, *names = arg.split() or [""]
    app.renderer.flush_streams()
    if not verb:
        for line in found.lines():
            app.console.print(Text(line, style="yellow" if "[untrusted]" in line else ""))
        for line in found.problem_lines():
            app.console.print(Text(line, style="red"))
        if any(state == "untrusted" for _, state in found.rows):
            app.console.print(Text("trust with /hooks trust N (or all); a changed hook asks "
                                   "again", style="dim"))
        return
    if verb not in ("trust", "disable") or not names:
        raise ValueError(f"usage: {USAGE}")
    picked = found.pick(names)
    assert found.store is not None
    (found.store.trust if verb == "trust" else found.store.disable)(picked)
    session = app.session
    if session is not None and session.hooks is not None:
        refresh_hooks(app.config, app.cwd, session.hooks.engine, session.runner.context.sandbox)
    done = "trusted" if verb == "trust" else "disabled"
    for hook in picked:
        app.console.print(Text(f"{done}: {hook.describe()}", style="green"))
        for line in found.trusted_lines(hook) if verb == "trust" else ():
            app.console.print(Text(line, style="yellow"))
    if not picked:
        app.console.print(Text("no project hook waits for trust"))
