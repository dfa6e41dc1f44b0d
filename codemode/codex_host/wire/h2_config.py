"""The ``h2`` connection as the host's server sets it up: what it advertises (streams,
window, header-list limit) and what it leaves unchecked because the host makes it."""

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
