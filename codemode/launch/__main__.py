"""``python -m codemode.launch serve SOCKET PID`` (the warm server), or the launcher."""

import sys

if sys.argv[1:2] == ["serve"]:
    from codemode.launch.serve import main as serve

    sys.exit(serve(sys.argv[2:]))

from codemode.launch import main

main()
