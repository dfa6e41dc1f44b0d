"""Putting our host beside a Codex binary: a copy of Codex's vendor folder (hard links
where the file system allows, so no space is used) whose ``codex-code-mode-host`` is a
one-line shim that execs ``interpreter code-mode-host``. Codex starts the host from the
folder of its own binary, so running the copy's ``bin/codex`` runs our host."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from pathlib import Path

HOST_NAME = "codex-code-mode-host"


def shim_text(command: list[str]) -> str:
    return f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n'


def vendor_with_our_host(vendor: Path, dest: Path, command: list[str]) -> Path:
    """``dest``: a copy of ``vendor`` (the folder holding ``bin/codex``) with our host as
    its ``bin/codex-code-mode-host``. Made once; the shim is rewritten when it differs."""
    if not (dest / "bin" / "codex").is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-"))
        try:
            try:
                shutil.copytree(vendor, building / "v", copy_function=os.link)
            except OSError:  # another file system: a real copy
                shutil.rmtree(building / "v", ignore_errors=True)
                shutil.copytree(vendor, building / "v")
            if not dest.exists():
                (building / "v").rename(dest)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    shim = dest / "bin" / HOST_NAME
    text = shim_text(command).encode()
    if not shim.exists() or shim.read_bytes() != text:
        # Unlinked first: it may be a hard link to Codex's own host, never written through.
        shim.unlink(missing_ok=True)
        shim.write_bytes(text)
        shim.chmod(0o755)
    return dest
