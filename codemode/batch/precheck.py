"""Checking a batch script's syntax once, before any repository runs it.

A script with a syntax error fails in every repository the same way; fifty copies of
the error help nobody, and a report full of them hides it. The script is compiled
(never run) in a bare QuickJS context, wrapped as the runtime wraps it: as statements
and, failing that, as one expression.
"""

from __future__ import annotations

from codemode.js_runtime.models import ExecError
from codemode.js_runtime.source import prepare

# As js_runtime.source wraps a program (one line before it), but only defined, not run.
_STATEMENTS = "(async () => {{\n{code}\n}});"
_EXPRESSION = "(async () => (\n{code}\n));"


def syntax_error(source: str) -> ExecError | None:
    """The syntax error in ``source``, with its position in the script; None if it
    compiles."""
    import quickjs  # lazy: the engine, only for a syntax check

    from codemode.js_runtime.errors import from_script_error

    program = prepare(source)
    first: str | None = None
    for template in (_STATEMENTS, _EXPRESSION):
        context = quickjs.Context()
        try:
            context.eval(template.format(code=program.code))
            return None
        except quickjs.JSException as exc:
            first = first or str(exc)
    assert first is not None
    error = from_script_error(first, program, [])
    return error if error.kind == "syntax" else None
