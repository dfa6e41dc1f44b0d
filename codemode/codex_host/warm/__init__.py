"""The shim beside a Codex binary (``beside``): our host in place of Codex's, warm
through the one warm server (``codemode.warm``)."""
