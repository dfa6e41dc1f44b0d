"""``python -m codemode.cli``: the `interpreter` command."""

from codemode.cli import main

main()
