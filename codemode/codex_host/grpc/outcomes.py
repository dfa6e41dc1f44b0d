"""The ``ExecutionOutcome`` and ``WaitResponse`` messages the gRPC service answers with,
from what the runtime reports, and how long a completed result waited for its ``Wait``
(the ``codex-code-mode-result-buffered-for-ns`` response header, as Codex's host sends it).
"""

from __future__ import annotations

import time
from typing import Any

from codemode.codex_host.session.model import ImageItem, TextItem
from codemode.codex_host.session.runtime import CodexSession, Reported
from codemode.codex_host.wire.messages import pb

_DETAIL = pb.enums["ImageDetail"]
# Codex's host answers every Wait with this response header (initial metadata).
BUFFERED_FOR = b"codex-code-mode-result-buffered-for-ns"


def outcome_message(code: CodexSession, reported: Reported, started_ns: int) -> Any:
    outcome, content = reported.outcome, reported.items
    message = pb.ExecutionOutcome(
        cell_id=outcome.cell_id,
        code_mode_host_duration_ns=max(0, time.monotonic_ns() - started_ns),
    )
    items = message.content_items
    for item in content:
        if isinstance(item, TextItem):
            items.add().text.text = item.text
        elif isinstance(item, ImageItem):
            image = items.add().image
            image.image_url = item.image_url
            if item.detail is not None:
                image.detail = _DETAIL[f"IMAGE_DETAIL_{item.detail.upper()}"]
    # A oneof's member is set in place (protobuf assigns no message to a field).
    if outcome.kind == "yielded":
        message.yielded.SetInParent()
    elif outcome.kind == "terminated":
        message.terminated.SetInParent()
    else:
        message.completed.SetInParent()
        error_text = code.error_text(outcome)
        if error_text is not None:
            message.completed.error_text = error_text
    return message


def missing(cell_id: str) -> Any:
    return pb.WaitResponse(
        missing_cell=pb.ExecutionOutcome(
            cell_id=cell_id,
            completed=pb.ExecutionCompleted(error_text=f"exec cell {cell_id} not found"),
        )
    )
