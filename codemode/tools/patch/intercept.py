"""``apply_patch`` sent through the shell tool.

Models trained on other harnesses often run ``apply_patch <<'EOF' ... EOF`` (or
``cd DIR && apply_patch <<'EOF'``) as a shell command. There is no such program;
``intercept_shell_patch``, in every registry's pipeline (its ``route`` stage,
``codemode.tools.pipeline``), asks ``match_shell_patch`` about each shell call and, on
a match, applies the patch with this engine instead of running anything. This module
stays light: the shell tool and the engine are imported only when a command mentions
``apply_patch``; the shell tool knows nothing of patches (so neither imports the other
at import time, and only this module imports the other at all).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode.tools.patch.heredoc import parse_heredoc_opener

if TYPE_CHECKING:
    from codemode.tools.base import Tool
    from codemode.tools.context import ToolContext
    from codemode.tools.pipeline import Call, Next
    from codemode.tools.shell import ShellResult

_NAMES = ("apply_patch", "applypatch")


def match_shell_patch(command: str) -> tuple[str | None, str] | None:
    """If ``command`` only applies a patch, return (the ``cd`` directory or None, the
    patch text); otherwise None, and the command runs as usual.

    Recognised: ``apply_patch <<'EOF'`` / ``<<EOF`` / ``<<"EOF"`` followed by the patch
    and the end tag (a missing end tag is forgiven, as bash does), optionally after
    ``cd DIR &&``; and ``apply_patch 'PATCH'`` with the patch as one quoted argument.
    """
    head, newline, body = command.lstrip().partition("\n")
    opener = parse_heredoc_opener(head)
    if opener is not None and newline:
        directory, tag = opener
        lines = body.split("\n")
        for i, line in enumerate(lines):
            if line.strip() == tag:
                if any(rest.strip() for rest in lines[i + 1 :]):
                    return None  # more commands follow the heredoc: not ours to run
                lines = lines[:i]
                break
        return directory, "\n".join(lines) + "\n"
    if not command.lstrip().startswith(_NAMES) and not command.lstrip().startswith("cd "):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 5 and words[0] == "cd" and words[2] == "&&":
        directory, words = words[1], words[3:]
    else:
        directory = None
    if len(words) == 2 and words[0] in _NAMES and "*** Begin Patch" in words[1]:
        return directory, words[1]
    return None


async def shell_patch_result(
    command: str, workdir: str | None, ctx: ToolContext
) -> ShellResult | None:
    """Apply the patch in ``command`` if it is an ``apply_patch`` invocation, returning
    what the shell tool reports: exit 0 and one ``A/M/D/R path`` line per file, or exit 1
    and the error (with no file changed). None when ``command`` is not one."""
    matched = match_shell_patch(command)
    if matched is None:
        return None
    import asyncio

    from codemode.tools.context import store_for
    from codemode.tools.patch.engine import apply_patch_text
    from codemode.tools.patch.errors import PatchError
    from codemode.tools.shell import ShellResult

    directory, text = matched
    started = time.monotonic()
    base = ctx.resolve(workdir) if workdir is not None else ctx.workspace
    if directory is not None:
        base = ctx.resolve(base / Path(directory).expanduser())
    if not base.is_dir():
        code, output = 1, f"cd: {directory or workdir}: No such directory\n"
    else:
        try:
            store = store_for(ctx)  # on the loop: an editor store binds to it
            outcome = await asyncio.to_thread(apply_patch_text, text, base, ctx, store)
            code, output = 0, outcome.summary()
        except PatchError as exc:
            code, output = 1, f"{exc}\n"
    return ShellResult(
        exit_code=code,
        output=output,
        truncated=False,
        duration_ms=round((time.monotonic() - started) * 1000, 1),
        timed_out=False,
    )


def takes_a_command(tool: Tool) -> bool:
    """Whether ``intercept_shell_patch`` may have anything to do for ``tool``'s calls:
    only a tool whose arguments have a ``command`` (the shell's, ``ShellArgs``) can be
    the shell; the exact test stays in the interceptor, this keeps the module light."""
    return "command" in tool.args_model.model_fields


async def intercept_shell_patch(call: Call, next_: Next) -> Any:
    """A call of the shell tool whose command only applies a patch: applied here, and
    answered as the shell would (see ``shell_patch_result``); every other call goes on."""
    args = call.args
    command = args.get("command") if isinstance(args, dict) else None
    if (
        call.tool is None
        or not isinstance(command, str)
        or ("apply_patch" not in command and "applypatch" not in command)
    ):
        return await next_(call)
    from codemode.tools.base import to_json
    from codemode.tools.shell import ShellArgs, run_shell

    if call.tool.handler is not run_shell:  # another tool that takes a `command`
        return await next_(call)
    parsed = call.tool.validate(args)
    if not isinstance(parsed, ShellArgs):
        return await next_(call)
    patched = await shell_patch_result(parsed.command, parsed.workdir, call.ctx)
    return to_json(patched) if patched is not None else await next_(call)
