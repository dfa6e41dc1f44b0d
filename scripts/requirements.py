"""The requirements pyproject.toml names, one a line, for the set-up scripts to install
themselves (codemode is then installed with --no-deps): the build system's with
``--build``, the lean install's, then each named extra's (comma-separated), the extras'
own ``codemode[...]`` references followed.

    python scripts/requirements.py [--build] EXTRA[,EXTRA...]
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator


def main(argv: list[str]) -> None:
    build = argv[:1] == ["--build"]
    names = argv[1 if build else 0].split(",")
    with open("pyproject.toml", "rb") as file:
        data = tomllib.load(file)
    project = data["project"]
    extras = project["optional-dependencies"]

    def expand(reqs: list[str]) -> Iterator[str]:
        for req in reqs:
            own = re.fullmatch(r"codemode\[([\w,-]+)\]", req.strip())
            if own:
                for extra in own.group(1).split(","):
                    yield from expand(extras[extra])
            else:
                yield req

    first = data["build-system"]["requires"] if build else []
    wanted = [req for name in names for req in expand(extras[name])]
    print(*first, *project["dependencies"], *wanted, sep="\n")


if __name__ == "__main__":
    main(sys.argv[1:])
