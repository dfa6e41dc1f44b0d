"""The terms every layer shares about tools: what a tool's failure is (``errors.ToolError``),
how its name is spelled on each surface (``names``), what a model is offered for it
(``spec.ToolSpec``), and how long output is cut (``elide``). Leaves, so the runtime, the
sandbox and the providers speak of tools without importing the tools package (which
imports them), and the tools speak to a model without importing a provider."""
