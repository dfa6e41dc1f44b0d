"""Codex's code-mode host protocol, served on codemode's runtime (`interpreter
code-mode-host`; docs/codex-host.md is the user's page). Read it top-down:

- ``wire/``: bytes to messages and back: protobuf's generated messages, gRPC on HTTP/2
  (``h2``), the request decode budget, reading stdin whatever it is;
- ``session/``: what a Codex session is whichever protocol carries it: the runtime
  session with a delegate per exec, tools and content items, catalog revisions, output
  truncation, the per-client bounds, the process metrics;
- ``grpc/`` and ``framed/``: each protocol's semantics on a session (Codex 0.169+ speaks
  gRPC, 0.148 the framed JSON protocol);
- ``serve/``: where the host listens, and its process's start and end;
- ``warm/``: the shim put beside a Codex binary, which reaches a host through the one
  warm server of every `interpreter` command (``codemode.warm``, where its compiled
  client lives too).
"""
