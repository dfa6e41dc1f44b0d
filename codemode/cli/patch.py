"""``interpreter apply-patch``: the apply_patch tool as a command."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from codemode.cli.options import cwd_option
from codemode.cli.root import cli


@cli.command("apply-patch")
@click.argument("patch", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@cwd_option("Directory the patch's paths are relative to, and the only one it may change.")
def apply_patch(patch: str, cwd: Path) -> None:
    """Apply PATCH (a file, or - for stdin, the default) to the files under --cwd.

    PATCH is in the apply_patch format (*** Begin Patch ... *** End Patch) or a unified
    diff. It applies completely or not at all. Prints one line per file (A added,
    M modified, D deleted, R old -> new renamed) and exits 0; on failure prints why to
    stderr and exits 1, with no file changed.
    """
    from codemode.tools.patch.command import run_apply_patch_command

    sys.exit(run_apply_patch_command(patch, cwd.resolve()))
