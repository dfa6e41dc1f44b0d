"""The framed JSON protocol over stdio (Codex 0.148): frames, hello, and sessions."""
