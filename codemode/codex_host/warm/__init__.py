"""The warm host server (a host ready before Codex asks) and the shim beside Codex."""
