"""The ``h2`` connection as the host's server sets it up: what it advertises (streams,
window, header-list limit), what it leaves unchecked because the host makes it, and the
bounds ``wire/h2_connection.py`` keeps on one client."""

from __future__ import annotations

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.settings import SettingCodes, Settings

from codemode.codex_host.wire.header_blocks import RepeatedBlocks

MAX_WINDOW = (1 << 31) - 1
# As many open streams as hyper's server allows by default; with the cap on request
# bytes held for all of them, a client holds a bounded amount of this process's memory.
MAX_STREAMS = 200
MAX_HEADER_LIST = 64 << 10  # h2's default, advertised (CVE-2016-6581)
MAX_BUFFERED = 64 << 20  # request bytes held for all of a connection's unanswered streams
# Bytes of messages handed to h2 in one turn of the loop before they are written at once:
# then the writer can say it is full (``pause_writing``) before more are made.
WRITE_SOON = 64 << 10
# Answer bytes one connection may hold while they wait for its client (its windows
# closed, or its writer full), across its streams, each counted as the copies of it that
# wait (``UNSENT_COPIES``). A report of output left the cells' own account when it was taken
# (``session/limits.OUTPUT_FOR_CLIENT``); a client that keeps its windows shut and asks
# for reports on stream after stream would otherwise make them pile up here. Past it
# the stream that would wait is reset (ENHANCE_YOUR_CALM): its client was not reading.
# One answer may always wait, whatever its size (a cell's whole report, 64 Mi characters
# of astral text, counts past this by itself, and a client reading slowly still gets it).
MAX_UNSENT = 256 << 20
# What a waiting answer holds, in copies of its bytes: the items it reports, the message
# made of them, its serialized bytes, and the framed copy (measured: 24 waiting reports
# of 16 MiB held 1,248 MiB).
UNSENT_COPIES = 4


def server_h2() -> H2Connection:
    """A server-side ``H2Connection`` with the host's settings (not yet initiated)."""
    # What we send is checked where it is made (lowercase names, percent-encoded
    # grpc-message, digits in our metadata), so h2 need not check it again on every
    # answer (a fifth of a CompleteToolCall's cost in h2); what the client sends is.
    h2 = H2Connection(
        H2Configuration(
            client_side=False,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
        )
    )
    h2.local_settings = Settings(
        client=False,
        initial_values={
            SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
            SettingCodes.INITIAL_WINDOW_SIZE: MAX_WINDOW,
            SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
        },
    )
    h2.decoder = RepeatedBlocks(h2.decoder.max_header_list_size)  # see its module
    return h2
