"""One exec's delegate: what the runtime hands Codex's host of one program.

Codex's own host hands each cell a delegate of its own (``invoke_tool``, ``notify``,
``cell_closed``); so does this one. The runtime gives each execution its delegate
(``js_runtime.session.CodeSession.execute(..., delegate=...)``): every nested call and
notification of that program comes here, with no routing of ours. What the program
says to its host arrives as the runtime's typed ``HostEvent``s (``globals.js`` chooses
the kinds): text and image items, collected until the client is next told about the
cell; notifications, sent at once; stored values, kept by the session for later execs;
and ``yield_control()``, passed on to the runtime as a request to yield.

Each protocol (``grpc/session.py``, ``framed/protocol.py``) says how a call, a notification and
a cell's end reach its client, by subclassing ``CodexExecution``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, Protocol

from codemode.codex_host.session.bounded_output import BoundedItems
from codemode.codex_host.session.items import parse_image, well_formed
from codemode.codex_host.session.limits import ConnectionCells, output_cost
from codemode.codex_host.session.model import ContentItem, TextItem, ToolFailed, ToolSpec
from codemode.codex_host.session.store import Store
from codemode.js_runtime.delegate import NestedCall
from codemode.js_runtime.models import ExecEvent, HostEvent
from codemode.tool_terms.errors import ToolError

# The items of one cell kept for the client between two reports, in characters: they
# are cut to max_output_tokens when reported (by the host or the client: ``cut_to``);
# beyond this the program's later items are dropped, said by one text item in their place.
# When the host truncates, text is bounded far lower as it comes (``bounded_output``),
# and this bounds the images.
ITEMS_CHARS = 64 * 1024 * 1024
# And in items: an empty or one-character item costs the host far more than its
# characters (``text("")`` in a loop held a gigabyte within minutes).
ITEMS_KEPT = 65_536
# And across the cells of one connection, in bytes: ``limits.OUTPUT_FOR_CLIENT``.


class CodexSession(Protocol):
    """What an execution needs of its session (``runtime.CodexSession``)."""

    store: Store
    client: ConnectionCells  # its connection's, shared by its other sessions

    def started(self, execution: CodexExecution) -> None: ...

    def request_yield(self, cell_id: str) -> None: ...


class CodexExecution:
    """The runtime's delegate for one exec, and what the client has not been told yet."""

    def __init__(
        self, session: CodexSession, execution_id: str, tool_call_id: str, tools: list[ToolSpec]
    ) -> None:
        self.session = session
        self.execution_id = execution_id
        self.tool_call_id = tool_call_id
        self.tools = {t.global_name: t for t in tools}
        self.cell_id = ""  # the runtime's, from the cell's start
        self.sequence = 0  # nested calls made so far
        self.items: list[ContentItem] = []
        self._bounded: BoundedItems | None = None  # the items, when the host truncates
        self._chars = 0
        self._kept = 0  # items counted against ITEMS_KEPT since the last report
        self._dropped = 0  # characters
        self._dropped_items = 0
        self._holding = 0  # bytes of the connection's output account its items cost
        self._let_go = False  # its end was reported, or its session closed: keeps nothing
        self._unsent = 0  # notifications not sent since the last report
        self._unsent_why = ""
        self.started = asyncio.Event()
        # The execute's max_output_tokens (or the default) when the session asked the host
        # to truncate (output_truncation SERVER); None: the client cuts the output itself.
        self.cut_to: int | None = None
        # When the program ran to its end (monotonic ns; 0: not yet, or it was stopped).
        self.finished_ns = 0

    # -- the runtime's delegate -------------------------------------------------------------

    async def call_tool(self, call: NestedCall) -> object:
        tool = self.tools.get(call.name)
        if tool is None:
            raise ToolError(f"tools.{call.name} is not enabled for this exec")
        self.sequence += 1
        try:
            return await self.invoke(tool, self.sequence, call.args)
        except ToolFailed as exc:
            raise ToolError(str(exc)) from None

    def notify(self, cell_id: str, event: ExecEvent) -> None:
        if type(event) is HostEvent:
            self._heard(event.kind, event.data)
        elif event.type == "cell.started":
            self.cell_id = cell_id
            self.session.started(self)
            self.started.set()
        elif event.type == "cell.finished":
            self.finished_ns = time.monotonic_ns()

    def _heard(self, kind: str, data: str) -> None:
        if self._let_go and kind in ("text", "image"):
            return  # its end was reported, or its session closed: it keeps nothing more
        if kind != "store":  # (a stored value is JSON text: escaped)
            data = well_formed(data)  # what the client is sent must be UTF-8
        if kind == "text":
            self._add(TextItem(data), len(data))
        elif kind == "image":
            item = parse_image(data)
            if item is not None:
                self._add(item, len(item.image_url))
        elif kind == "notify":
            self.send_notification(data)
        elif kind == "store":
            with contextlib.suppress(ValueError, TypeError):
                key, value = json.loads(data)
                # The program's store() checked the bound already (``session/store.py``).
                self.session.store.keep(str(key), str(value))
        elif kind == "yield":
            self.session.request_yield(self.cell_id)

    def _add(self, item: ContentItem, chars: int) -> None:
        bounded = self._bounded
        if bounded is None and self.cut_to is not None:
            bounded = self._bounded = BoundedItems()
        # Past the connection's bound an item is dropped as past the cell's own: an item
        # that fits its cell may not fit what the connection's other cells hold already.
        cost = output_cost(item.text if isinstance(item, TextItem) else item.image_url)
        room = self.session.client.fits(cost)
        if bounded is not None and type(item) is TextItem:
            if room:
                self._keep(bounded, item)  # its text costs at most its bound
            else:
                self._drop(chars)
            return
        if (
            self._dropped_items
            or not room
            or self._chars + chars > ITEMS_CHARS
            or self._kept >= ITEMS_KEPT
        ):
            self._drop(chars)
            return
        if bounded is not None:
            self._keep(bounded, item)
        else:
            self.items.append(item)
            self._charge(cost)
        self._chars += chars
        self._kept += 1

    def _drop(self, chars: int) -> None:
        self._dropped += chars
        self._dropped_items += 1

    def _keep(self, bounded: BoundedItems, item: ContentItem) -> None:
        """``item`` to the bounded items: what they hold grows by its cost at most (and
        shrinks when the tail drops its oldest)."""
        before = bounded.held
        bounded.add(item)
        self._charge(bounded.held - before)

    def _charge(self, change: int) -> None:
        self._holding += change
        self.session.client.charge(change)

    def let_go(self) -> None:
        """The cell's end was reported, or its session closed: what it keeps for its
        client no longer counts on the connection's account (a report took it already,
        or an Execute still observing the cell reports it now, or it goes with this
        execution), and it keeps no more of its program's items."""
        self._let_go = True
        self._charge(-self._holding)

    def add_item(self, item: TextItem) -> None:
        """A text item of the host's own at the end of the report (bounded with the rest)."""
        self._add(item, len(item.text))

    def take_items(self) -> list[ContentItem]:
        """What the program produced since the client was last told: whole, or when the
        host truncates, bounded as Codex's host bounds it (``session/bounded_output.py``;
        the session then cuts the report: ``runtime.CodexSession``)."""
        if self._bounded is not None:
            self.items = self._bounded.take()
        items, self.items, self._chars, self._kept = self.items, [], 0, 0
        self._charge(-self._holding)  # the client has them now
        if self._dropped_items:
            items.append(
                TextItem(
                    f"[{self._dropped} more characters of output dropped, "
                    f"in {self._dropped_items} items]"
                )
            )
            self._dropped = self._dropped_items = 0
        if self._unsent:
            items.append(
                TextItem(f"[{self._unsent} notifications were not sent: {self._unsent_why}]")
            )
            self._unsent = 0
        return items

    def unsent_notification(self, why: str) -> None:
        """A ``notify()`` the host did not queue (its client holds too many already): the
        cell's next report counts it."""
        self._unsent += 1
        self._unsent_why = why

    # -- the protocol's part ----------------------------------------------------------------

    async def invoke(self, tool: ToolSpec, sequence: int, input: Any) -> Any:
        """The client runs ``tool``; its JSON result, or ``ToolFailed``."""
        raise NotImplementedError

    def send_notification(self, text: str) -> None:
        """``notify()``: sent to the client now."""
        raise NotImplementedError

    def closed(self) -> None:
        """The cell's end has been reported to the client (or its session closed)."""
        raise NotImplementedError
