"""The built-in tools' TypeScript declarations, kept from one start to the next.

Writing them means importing every tool module and building each tool's pydantic models
and JSON schemas: 40-80 ms of CPU at every `interpreter exec` start, for the same text
each time, before the first model request can go out. A registry that holds only tools
not yet loaded from codemode's own modules (the built-ins and the plan tool, as every
session starts) has its declarations looked up here instead, under a key that changes
with anything they are made from: the tools' names and modules, the options, the Python
and pydantic versions, and the size and modification time of every file of
``codemode/tools`` (models, descriptions, the writer itself). One file per set of
options in codemode's cache (``user_dirs.cache_home``), replaced when its key changes;
anything unreadable there is ignored and written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from codemode.locations.user_dirs import cache_home
from codemode.tools.registry import ToolRegistry

FORMAT = 1
_TOOLS_DIR = Path(__file__).resolve().parent
_OWN = "codemode.tools."


def cached(
    registry: ToolRegistry, options: tuple[bool, bool, bool], make: Callable[[], str]
) -> str:
    """``make()``, or what it gave last time for the same registry and ``options``."""
    key = _key(registry, options)
    if key is None:
        return make()
    path = cache_home() / "declarations" / f"v{FORMAT}-{''.join('01'[o] for o in options)}.json"
    try:
        held = json.loads(path.read_text("utf-8"))
        if isinstance(held, dict) and held.get("key") == key and isinstance(held.get("text"), str):
            return str(held["text"])
    except (OSError, ValueError):
        pass
    text = make()
    _store(path, key, text)
    return text


def _key(registry: ToolRegistry, options: tuple[bool, bool, bool]) -> str | None:
    """The key of the registry's declarations; None when some tool is already loaded or
    comes from elsewhere (its models may be anything: they are written afresh)."""
    lazy = registry.lazy_specs()
    if lazy is None or not all(spec.startswith(_OWN) for spec in lazy.values()):
        return None
    import pydantic

    files = []
    for folder, dirs, names in os.walk(_TOOLS_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".md", ".lark")):
                try:
                    st = os.stat(os.path.join(folder, name))
                except OSError:
                    return None
                files.append([os.path.relpath(os.path.join(folder, name), _TOOLS_DIR),
                              st.st_size, st.st_mtime_ns])  # fmt: skip
    material = [FORMAT, sys.version, pydantic.VERSION, list(options), list(lazy.items()), files]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def _store(path: Path, key: str, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.write_text(json.dumps({"key": key, "text": text}), "utf-8")
        os.replace(tmp, path)  # whole or not at all, whoever else writes it meanwhile
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only cache: written again next time
