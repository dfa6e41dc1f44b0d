"""The runtime's typed channel out of a program: a host's globals script takes the
prelude's channel (``__cm.hostChannel()``, a function of ``(kind, data)``) into its
closure and gives programs functions of its own; each call reaches the execution's
delegate as a ``HostEvent(kind, data)``, in order with the program's calls, never as
console output. Programs cannot get the channel themselves (it is handed out once), so
they cannot forge a host's events, and ``console`` keeps its meaning."""

from __future__ import annotations

import pytest

from codemode.js_runtime import CodeSession, Completed, ExecEvent, Limits, NestedCall, ToolSet
from codemode.js_runtime.models import HostEvent, LogEvent

# A host's globals: `shout(x)` sends a "shout" event, `later()` a "later" one.
GLOBALS = """(function (global) {
  const send = global.__cm.hostChannel();
  global.shout = (value) => send("shout", String(value));
  global.later = () => send("later", "");
})(globalThis);"""


class Owner:
    def __init__(self) -> None:
        self.events: list[tuple[str, ExecEvent]] = []

    async def call_tool(self, call: NestedCall) -> object:
        return "called"

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        self.events.append((cell_id, event))

    def seen(self) -> list[tuple[str, str]]:
        out = []
        for _cell, event in self.events:
            if isinstance(event, HostEvent):
                out.append((event.kind, event.data))
            elif isinstance(event, LogEvent):
                out.append(("console." + event.level, event.text))
            elif event.type == "tool_call.started":
                out.append(("call", ""))
        return out


@pytest.fixture(params=["quickjs", "v8"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_host_event_reaches_the_delegate_typed_and_in_order(engine: str) -> None:
    session = CodeSession(
        engine=engine, tools=ToolSet(("t",)), limits=Limits(timeout_s=60), persistent=False,
        setup_scripts=[GLOBALS],
    )  # fmt: skip
    owner = Owner()
    try:
        source = (
            'shout("one");\nconsole.log("plain");\nawait tools.t({});\n'
            'shout({a: 1});\nshout("two\\nlines");\nlater();\n'
            'for (let i = 0; i < 200; i++) shout(i);\nreturn __cm.hostChannel();'
        )
        done = await session.execute(source, delegate=owner, yield_time=120)
        assert isinstance(done, Completed), done
        assert done.result.error is None, done.result.error
        # The channel is the globals script's alone: handed out once.
        assert done.result.value is None
        # Host events are not console output; console output stays console output.
        assert done.result.output == "plain"
        seen = owner.seen()
        assert seen[:6] == [
            ("shout", "one"), ("console.log", "plain"), ("call", ""),
            ("shout", "[object Object]"), ("shout", "two\nlines"), ("later", ""),
        ]  # fmt: skip
        assert seen[6:] == [("shout", str(i)) for i in range(200)]
        assert {cell for cell, _ in owner.events} == {done.cell_id}
    finally:
        await session.close()


async def test_a_program_cannot_forge_a_host_event(engine: str) -> None:
    """Whatever a program tries, only the globals script's functions send host events:
    the primitive is gone, console levels are console output, and a level name or a
    drained state it fakes is not a channel."""
    session = CodeSession(
        engine=engine, limits=Limits(timeout_s=60), persistent=False, setup_scripts=[GLOBALS]
    )
    owner = Owner()
    try:
        source = (
            "const tried = [];\n"
            "for (const name of ['__cm_host', '__cm_hostLog']) {\n"
            "  try { globalThis[name]('forged', 'x'); } catch (e) { tried.push(name); }\n"
            "}\n"
            "try { __cm.hostChannel()('forged', 'x'); } catch (e) { tried.push('hostChannel'); }\n"
            "console.log('host'); console.debug('yield'); console.warn('shout');\n"
            "const left = Object.getOwnPropertyNames(globalThis).filter((n) => /host/i.test(n));\n"
            "return [tried, left];"
        )
        done = await session.execute(source, delegate=owner, yield_time=120)
        assert isinstance(done, Completed), done
        assert done.result.value == [["__cm_host", "__cm_hostLog", "hostChannel"], []]
        assert not [e for _, e in owner.events if isinstance(e, HostEvent)]
        assert done.result.output.splitlines() == ["host", "yield", "shout"]
    finally:
        await session.close()


async def test_without_a_globals_script_the_primitive_is_out_of_reach(engine: str) -> None:
    session = CodeSession(engine=engine, limits=Limits(timeout_s=60), persistent=True)
    owner = Owner()
    try:
        done = await session.execute(
            "return __cm.hostChannel();", delegate=owner, yield_time=120
        )
        assert isinstance(done, Completed) and done.result.value is None, done
    finally:
        await session.close()
