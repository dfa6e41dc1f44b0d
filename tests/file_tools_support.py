"""What the file-tool attack tests share: the built-in tools plus ``edit``, called in a
workspace of their own, and the error a refused call raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemode.tools.builtin import builtin_registry
from codemode.tools.context import ToolContext, ToolError
from codemode.tools.edit import EDIT


def registry() -> Any:
    r = builtin_registry()
    r.add(EDIT)
    return r


async def call(ws: Path, name: str, **args: Any) -> Any:
    return await registry().invoke(name, args, ToolContext(workspace=ws))


async def call_error(ws: Path, name: str, **args: Any) -> str:
    with pytest.raises(ToolError) as info:
        await call(ws, name, **args)
    return str(info.value)
