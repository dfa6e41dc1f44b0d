"""Providers: streaming wire clients (chat completions, responses, anthropic messages) and
the provider catalog.

``base`` holds the neutral types; ``catalog.open_provider`` returns a client; the wire
modules (and httpx with them) are imported only when a client is opened.
"""
