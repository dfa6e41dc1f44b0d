"""The composition root: where a session is put together from configuration, the
command line and what its entry point supplies (listeners, an approver, an editor).

Layering: the entry points (``interpreter`` / ``exec`` / ``acp`` / ``mcp-server``, the
batch worker) call down into this package; it calls down into ``agent``,
``harnesses``, ``tools``, ``sandbox`` and ``providers``, and nothing below imports it.
``build_session`` returns a finished ``Session``: callers never assign into it.

Nothing is imported here, so that ``interpreter --help`` stays cheap: import
``codemode.assembly.session`` (or ``.options``, ``.model``, ``.parts``).
"""
