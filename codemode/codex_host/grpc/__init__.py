"""The gRPC protocol (Codex 0.169 and later): the CodeModeHost service on sessions."""
