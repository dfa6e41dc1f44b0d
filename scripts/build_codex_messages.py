#!/usr/bin/env python3
"""Generate the Codex code-mode host's message classes from its .proto.

    python scripts/build_codex_messages.py          # write codex_host/wire/code_mode_pb2.py
    python scripts/build_codex_messages.py --check  # exit 1 if it is out of date

Input: ``codemode/codex_host/wire/codex.code_mode.v1.proto`` (the protocol's revision we
serve; docs/codex-host.md says how it was derived). Output: ``code_mode_pb2.py`` beside
it, protoc's Python output (from grpcio-tools, the ``test`` extra) with its module name
changed to where it lives in our package; the serialized descriptor still names the
file ``codex.code_mode.v1.proto``, so a client protoc generates from the same file can
be imported beside it. The generated module needs a protobuf runtime at least as new as
the protoc that wrote it (it says which: ``ValidateProtobufRuntimeVersion``), so after
regenerating with a newer grpcio-tools, raise ``protobuf>=`` in pyproject.toml to match.
``tests/test_codex_host_messages.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "codemode" / "codex_host" / "wire"
PROTO = "codex.code_mode.v1.proto"
OUT = FOLDER / "code_mode_pb2.py"
MODULE = "codemode.codex_host.wire.code_mode_pb2"
HEADER = (
    "# The Codex code-mode host's messages, generated from codex.code_mode.v1.proto:\n"
    "# regenerate with `python scripts/build_codex_messages.py` (never edit by hand).\n"
)


def generate() -> str:
    try:
        from grpc_tools import protoc
    except ImportError:
        raise SystemExit(
            "grpcio-tools is not installed: pip install 'codemode[test]' (its protoc "
            "generates the message classes)"
        ) from None
    with tempfile.TemporaryDirectory(prefix="codex-messages-") as out:
        rc = protoc.main(["protoc", f"-I{FOLDER}", f"--python_out={out}", str(FOLDER / PROTO)])
        if rc != 0:
            raise SystemExit(f"protoc could not compile {PROTO} (exit status {rc})")
        text = (Path(out) / "codex" / "code_mode" / "v1_pb2.py").read_text()
    # protoc names the module after the file (codex.code_mode.v1_pb2); its classes say
    # where they live through this name alone.
    text, found = re.subn(r"'codex\.code_mode\.v1_pb2'", repr(MODULE), text)
    if found != 1:
        raise SystemExit("protoc's output changed shape: its module name was not found once")
    return HEADER + text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = generate()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(
                f"{OUT.relative_to(ROOT)} is not what {PROTO} generates: "
                "run python scripts/build_codex_messages.py",
                file=sys.stderr,
            )
            raise SystemExit(1)
        print(f"{OUT.relative_to(ROOT)} is up to date")
        return
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
