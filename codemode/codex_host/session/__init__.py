"""A Codex session whichever protocol carries it: the runtime session, a delegate per
exec, tools and content items, catalog revisions, truncation, bounds and metrics."""
