"""Test support shipped with codemode: the scripted model server (the one stand-in for a
model service) used by the test suite, benchmarks and terminal tests."""

from codemode.testing.scripted_server import (
    RecordedRequest,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedToolCall,
)

__all__ = ["RecordedRequest", "ScriptedModelServer", "ScriptedReply", "ScriptedToolCall"]
