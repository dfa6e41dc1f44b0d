"""What every layer calls a tool's failure (``errors.ToolError``) and how a tool's name
is spelled on each surface (``names``): leaves, so the runtime and the sandbox speak of
tools without importing the tools package (which imports them)."""
