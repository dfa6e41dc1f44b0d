"""Serving the host: where it listens (stdio, TCP), its TCP clients, its start and end."""
