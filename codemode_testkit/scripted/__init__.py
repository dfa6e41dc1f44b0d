"""The scripted model: a stand-in for a model service that answers from a script.

- ``replies``: what a script is made of (``ScriptedReply``, ``ScriptedToolCall``) and
  the requests received (``RecordedRequest``);
- ``script``: ``ScriptedModel``, which decides each answer from the script;
- ``chat``, ``responses``, ``anthropic``: each wire's events and error bodies
  (``encoding`` holds what they share, ``wires`` picks one by name);
- ``http_server``: ``ScriptedModelServer``, the script behind real HTTP on 127.0.0.1,
  the default for tests;
- ``in_process``: ``ScriptedTransport``, the script as an httpx transport, for
  provider and loop tests without sockets (it imports httpx; the rest does not).

``codemode_testkit.scripted_server`` re-exports the names tests use.
"""
