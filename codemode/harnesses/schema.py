"""JSON schemas of tool arguments, shaped the way every wire accepts them (kept here
for the modules that import it from the harnesses; defined with the other surfaces)."""

from __future__ import annotations

from codemode.tools.surfaces import parameters_schema

__all__ = ["parameters_schema"]
