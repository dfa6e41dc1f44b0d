"""What the commands without a package of their own do, beneath the CLI's parsing:
``interpreter exec``/``resume`` (``exec``), ``interpreter run`` (``run``), and
``interpreter mcp list``/``mcp-server`` (``mcp``). Entry points: each builds what it
needs from the composition root (``codemode.assembly``) or the host API."""
